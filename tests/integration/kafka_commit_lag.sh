#!/usr/bin/env bash
# The group's committed offsets, which lag monitors read, follow the database
# while dedupd runs: acknowledgements are committed at most every 100 ms,
# together, not once per batch — and none is lost for good. With small
# batches (10 messages) on 4 partitions:
#   1. idle after a burst, the group's committed offset of every partition
#      equals dedupd.offsets within seconds, dedupd still running;
#   2. killed right after the database caught up (acknowledgements not yet
#      sent), a restarted instance brings the lag to 0 with no new message;
#   3. a second instance joining (a rebalance) loses none either.
. "$(dirname "$0")/lib.sh"

T="pay_commit_lag_$$"
topic "$T" 4
export BATCH_MAX=10 SEED_ACCOUNTS=50 INITIAL_BALANCE=100000
write_config "$WORK/c.yaml" "$T"

# orders FROM TO: keyed by account, so they spread over the partitions
orders() {
        for ((i = $1; i <= $2; i++)); do
                printf 'u%d\t{"order_id":"o-%d","user_id":%d,"amount":1}\n' $((i % 50)) "$i" $((i % 50 + 1))
        done | "$KT" produce -t "$T"
}

# in_step: the group's committed offset of each partition is the database's
in_step() {
        local group db
        group=$("$KT" offsets -t "$T" -g "grp-$ID" | awk '$1 != "total" && $3 > 0 {print $1, $4}')
        db=$(sql "SELECT partition, next_offset FROM dedupd.offsets WHERE topic = '$T' ORDER BY partition" | tr '|' ' ')
        [[ -n $db && $group == "$db" ]]
}

# caught_up WHAT: lag 0 and the group in step with the database within 10 s
caught_up() {
        poll 10 in_step || fail "$1: the group's committed offsets ($("$KT" offsets -t "$T" -g "grp-$ID" | tr '\n' ' ')) are not the database's ($(sql "SELECT string_agg(partition || ':' || next_offset, ' ' ORDER BY partition) FROM dedupd.offsets WHERE topic = '$T'"))"
        assert_eq "$(kafka_lag "$T")" 0 "$1: Kafka consumer lag"
}

start d1 "$WORK/c.yaml"
wait_assigned d1 "$T"
orders 1 600
wait_done "$T"
caught_up "1. idle after a burst, dedupd running"
batches=$(sql "SELECT count(*) FROM dedupd.progress_log WHERE topic = '$T'")
((batches >= 60)) || fail "600 messages in $batches batch records: the batches are not small"
log "ok: 600 messages in $batches batch records (one per batch and partition)"

orders 601 1200
wait_done "$T"
crash d1
log "lag right after the kill: $(kafka_lag "$T") (what was not yet committed to the group)"
start d2 "$WORK/c.yaml"
wait_assigned d2 "$T"
caught_up "2. restarted after a kill, no new message"

start d3 "$WORK/c.yaml"
for ((i = 0; i < 300; i++)); do grep -q "assigned $T/" "$WORK/d3.log" && break; sleep 0.1; done
orders 1201 1800
wait_done "$T"
caught_up "3. two instances after a rebalance"
stop d3
stop d2

assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 1800 "ledger rows"
assert_eq "$(sql "SELECT count(DISTINCT idem_key) FROM transfer_ledger")" 1800 "distinct keys with an effect"
assert_eq "$(kafka_lag "$T")" 0 "Kafka consumer lag after both stopped"
