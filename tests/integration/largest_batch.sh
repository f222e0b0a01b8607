#!/usr/bin/env bash
# The largest batch each source's settings allow is one transaction, off the stack: 100,000 fresh messages
# (batch.max_messages' most) on Kafka and on NATS JetStream (nats.max_ack_pending raised to match), and
# 65,535 (rabbitmq.prefetch's most) on RabbitMQ — each applied in one batch, each order once. At about 132 bytes
# a message on the stack a batch of some 63,000 overflowed the 8 MiB main stack.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"
. "$(dirname "$0")/rmq_lib.sh"

orders() { awk -v n="$1" -v p="$2" 'BEGIN { for (i = 1; i <= n; i++) printf "{\"order_id\":\"%s%d\",\"user_id\":%d,\"amount\":1}\n", p, i, i % 100 + 1 }'; }
export SEED_ACCOUNTS=100 INITIAL_BALANCE=1000000
one_batch() { # WHAT TOPIC N
        assert_eq "$(sql "SELECT count(*) || '/' || max(consumed) FROM dedupd.progress_log WHERE topic = '$2'")" "1/$3" "$1: batches/largest"
        assert_eq "$(sql "SELECT count(DISTINCT idem_key) || '/' || count(*) FROM transfer_ledger WHERE idem_key LIKE '$1-%'")" "$3/$3" "$1: orders applied once"
}
big_batch() { # MAX
        cat <<YAML
    batch: {max_messages: $1, max_wait_ms: 60000, adaptive: false}
YAML
}

# ---- Kafka --------------------------------------------------------------------------------
T="big_$$"
topic "$T" 1
BATCH_MAX=100000 write_config "$WORK/k.yaml" "$T"
sed -i 's/^      max_wait_ms: 20$/      max_wait_ms: 60000\n      adaptive: false/' "$WORK/k.yaml"
orders 100000 kafka- | "$KT" produce -t "$T"
start dk "$WORK/k.yaml"
wait_done "$T" 180
stop dk
one_batch kafka "$T" 100000

# ---- NATS JetStream -------------------------------------------------------------------------
nats_stream
ACK_WAIT_MS=120000 BATCH_MAX=100000 write_nats_config "$WORK/n.yaml" "  max_ack_pending: 100000"
sed -i 's/^      max_wait_ms: 20$/      max_wait_ms: 60000\n      adaptive: false/' "$WORK/n.yaml"
orders 100000 nats- | publish
start dn "$WORK/n.yaml"
nats_done 180
stop dn
one_batch nats "$SUBJ" 100000

# ---- RabbitMQ ---------------------------------------------------------------------------------
Q="bigq_$$"
rmq_queue "$Q"
PREFETCH=65535 BATCH_MAX=65535 rmq_write_config "$WORK/r.yaml" "$Q"
sed -i 's/^      max_wait_ms: 20$/      max_wait_ms: 60000\n      adaptive: false/' "$WORK/r.yaml"
orders 65535 rabbitmq- | rmq_publish "$Q"
start dr "$WORK/r.yaml"
rmq_wait_empty "$Q" 180
stop dr
one_batch rabbitmq "$Q" 65535
log "ok: the largest batch of each source, one transaction each"
