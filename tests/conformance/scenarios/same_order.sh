#!/usr/bin/env bash
# Same-order duplicates: the seed's order 9527/PAY sent 100 times, by four
# producers at once -> exactly one effect (balance 990), the first outcome
# stored, 99 duplicates counted, every message acknowledged.
. "$(dirname "$0")/../lib.sh"

b_setup pay_same 4
b_config "$WORK/c.yaml"
start d1 "$WORK/c.yaml"

producers=()
for p in 1 2 3 4; do
        (for i in $(seq 1 25); do
                echo '{"order_id":"9527","user_id":1,"amount":10}'
        done | b_produce "publisher:$p") &
        producers+=($!)
done
for pid in "${producers[@]}"; do wait "$pid" || fail "a producer failed"; done
assert_eq "$(b_count)" 100 "messages produced"

b_wait_done
stop d1

assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key = '9527/PAY'")" 1 "ledger rows for 9527/PAY"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 1")" 990 "balance of user 1"
assert_eq "$(sql "SELECT status || ' ' || response FROM dedupd.keys WHERE idem_key = '9527/PAY'")" "DONE OK: debited 10" "stored first outcome"
assert_eq "$(sql "SELECT sum(applied) || '/' || sum(duplicates) FROM dedupd.offsets WHERE topic = '$NAME_B'")" "1/99" "applied/duplicates counted"
assert_eq "$(b_committed)" 100 "messages the database committed past"
b_check_acked
b_check_started d1
