#!/usr/bin/env bash
# The seed's scenario on NATS JetStream: the same order-9527/PAY message
# published 100 times, by four publishers at once -> exactly one effect,
# balance 990, every message acknowledged.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"

nats_stream
write_nats_config "$WORK/c.yaml"
start d1 "$WORK/c.yaml"

pubs=()
for p in 1 2 3 4; do
        (for i in $(seq 1 25); do
                echo '{"order_id":"9527","user_id":1,"amount":10}'
        done | publish "publisher:$p") &
        pubs+=($!)
done
for pid in "${pubs[@]}"; do wait "$pid" || fail "a publisher failed"; done
assert_eq "$(last_seq)" 100 "messages in the stream"

nats_done
stop d1

assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key = '9527/PAY'")" 1 "ledger rows for 9527/PAY"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 1")" 990 "balance of user 1"
assert_eq "$(sql "SELECT status || ' ' || response FROM dedupd.keys WHERE idem_key = '9527/PAY'")" "DONE OK: debited 10" "stored first outcome"
assert_eq "$(sql "SELECT sum(applied) || '/' || sum(duplicates) FROM dedupd.offsets WHERE topic = '$SUBJ'")" "1/99" "applied/duplicates counted"
assert_eq "$(sql "SELECT partition || ':' || next_offset FROM dedupd.offsets WHERE topic = '$SUBJ'")" "0:101" "position: partition 0, past stream sequence 100"
assert_eq "$(consumer_field ack_floor)" 100 "the consumer's acknowledged floor"
assert_eq "$(consumer_field ack_pending)" 0 "messages left unacknowledged"
grep -q "consuming 1 subject(s) of stream $STREAM" "$WORK/d1.log" || fail "dedupd did not say what it consumes"
