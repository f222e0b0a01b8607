#!/usr/bin/env bash
# A business rejection is recorded as FAILED with its first error, and every
# redelivery gets the same rejection without touching the balance.
. "$(dirname "$0")/lib.sh"

T="pay_insufficient_$$"
topic "$T" 1
LOG_LEVEL=debug write_config "$WORK/c.yaml" "$T"
printf '%s\n' '{"order_id":"A","user_id":3,"amount":600}' '{"order_id":"B","user_id":3,"amount":600}' |
        "$KT" produce -t "$T"
start d1 "$WORK/c.yaml"
wait_done "$T"
stop d1

assert_eq "$(sql "SELECT status || ': ' || response FROM dedupd.keys WHERE idem_key = 'B/PAY'")" "FAILED: insufficient balance" "order B recorded"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 3")" 400 "balance after A"

# Money arrives; B is redelivered (a retry, a replay) -- and must still be the
# same rejection: failures are recorded so retries converge.
sql "UPDATE account SET balance = balance + 1000 WHERE user_id = 3"
printf '%s\n' '{"order_id":"B","user_id":3,"amount":600}' '{"order_id":"B","user_id":3,"amount":600}' |
        "$KT" produce -t "$T"
start d2 "$WORK/c.yaml"
wait_done "$T"
stop d2

assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 3")" 1400 "balance unchanged by redelivery"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key = 'B/PAY'")" 0 "ledger rows for B"
assert_eq "$(sql "SELECT status || ': ' || response FROM dedupd.keys WHERE idem_key = 'B/PAY'")" "FAILED: insufficient balance" "B still FAILED"
grep -q "duplicate B/PAY absorbed; first outcome FAILED: insufficient balance" "$WORK/d2.log" ||
        fail "the redelivery was not answered with the first rejection"
log "ok: redelivery answered with the stored rejection"
assert_eq "$(sql "SELECT rejected || '/' || duplicates FROM dedupd.offsets WHERE topic = '$T'")" "1/2" "rejected/duplicates counted"
