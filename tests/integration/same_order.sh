#!/usr/bin/env bash
# The seed's scenario 1: the same order-9527/PAY message produced 100 times,
# by four producers at once -> exactly one effect, balance 990, all acknowledged.
. "$(dirname "$0")/lib.sh"

T="pay_same_$$"
topic "$T" 4
write_config "$WORK/c.yaml" "$T"
start d1 "$WORK/c.yaml"

# Four concurrent producers, 25 copies each, Kafka keys spread over partitions.
producers=()
for p in 1 2 3 4; do
        (for i in $(seq 1 25); do
                printf 'k%d-%d\t{"order_id":"9527","user_id":1,"amount":10}\n' "$p" "$i"
        done | "$KT" produce -t "$T") &
        producers+=($!)
done
for pid in "${producers[@]}"; do wait "$pid" || fail "a producer failed"; done
assert_eq "$(produced "$T")" 100 "messages produced"

wait_done "$T"
stop d1

assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key = '9527/PAY'")" 1 "ledger rows for 9527/PAY"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 1")" 990 "balance of user 1"
assert_eq "$(sql "SELECT status || ' ' || response FROM dedupd.keys WHERE idem_key = '9527/PAY'")" "DONE OK: debited 10" "stored first outcome"
assert_eq "$(sql "SELECT sum(applied) || '/' || sum(duplicates) FROM dedupd.offsets WHERE topic = '$T'")" "1/99" "applied/duplicates counted"
assert_eq "$(kafka_lag "$T")" 0 "Kafka consumer lag after shutdown"
