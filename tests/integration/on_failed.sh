#!/usr/bin/env bash
# on_failed (issue 21 §4): a FAILED key (the handler rejected its message)
# absorbs every later copy by default — right for money. With
# `on_failed: retry` a copy arriving on_failed_after past the failure runs
# again, once, as a new generation recorded in dedupd.reruns; a key that
# failed more recently is still absorbed; the metric and the log count it.
# External mode refuses the setting.
. "$(dirname "$0")/lib.sh"

T="onfailed_$$"
topic "$T" 1
export SEED_ACCOUNTS=1 INITIAL_BALANCE=10
write_config "$WORK/absorb.yaml" "$T"
sed "s/^    batch:$/    on_failed: retry\n    batch:/" "$WORK/absorb.yaml" >"$WORK/retry.yaml"
grep -q "on_failed: retry" "$WORK/retry.yaml" || fail "no on_failed line in the config"
order() { printf 'u1\t{"order_id":"%s","user_id":1,"amount":20}\n' "$1" | "$KT" produce -t "$T"; }
row() { sql "SELECT status || '/' || response FROM dedupd.keys WHERE idem_key = '$1/PAY'"; }
balance() { sql "SELECT balance FROM account WHERE user_id = 1"; }

order o-1
order o-2
start d1 "$WORK/absorb.yaml"
wait_done "$T"
assert_eq "$(row o-1)" "FAILED/insufficient balance" "o-1 rejected"
sql "UPDATE account SET balance = 100 WHERE user_id = 1" # the customer topped up
sql "UPDATE dedupd.keys SET updated_at = now() - interval '2 hours' WHERE idem_key IN ('o-1/PAY', 'o-2/PAY')"
order o-1
wait_done "$T"
stop d1
assert_eq "$(row o-1)/$(balance)" "FAILED/insufficient balance/100" "on_failed: absorb (the default): o-1's copy gets the first rejection"

start d2 "$WORK/retry.yaml"
order o-1 # failed two hours ago: runs again (balance 100 -> 80)
wait_done "$T"
order o-3 # fresh: applied (80 -> 60)
wait_done "$T"
sql "UPDATE account SET balance = 10 WHERE user_id = 1"
order o-4 # rejected now
wait_done "$T"
sql "UPDATE account SET balance = 100 WHERE user_id = 1"
order o-4 # failed a moment ago: still absorbed
wait_done "$T"
stop d2
assert_eq "$(row o-1)" "DONE/OK: debited 20" "o-1 ran again and was applied"
assert_eq "$(row o-4)" "FAILED/insufficient balance" "o-4, failed within on_failed_after (1h): absorbed"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key = 'o-1/PAY'")" 1 "o-1's ledger rows"
assert_eq "$(balance)" 100 "balance (o-1 and o-3 debited before the last top-up)"
assert_eq "$(sql "SELECT generation || '|' || mode || '|' || requested_by || '|' || reason || '|' || prev_status || '|' || prev_response
                  FROM dedupd.reruns WHERE idem_key = 'o-1/PAY'")" \
        "1|on-failed|dedupd|on_failed: retry, FAILED more than 1h ago|FAILED|insufficient balance" "the audit row of o-1's second run"
assert_eq "$(sql "SELECT count(*) FROM dedupd.reruns WHERE namespace = 'it-$ID'")" 1 "audit rows (o-2 had no copy, o-4 failed too recently)"
grep -q "1 FAILED key ran again (on_failed: retry)" "$WORK/d2.log" || fail "the retry is not logged"

# External mode refuses it.
sed "s/^    batch:$/    mode: external\n    on_failed: retry\n    batch:/" "$WORK/absorb.yaml" >"$WORK/ext.yaml"
rc=0; "$DEDUPCTL" check --offline -c "$WORK/ext.yaml" >"$WORK/check.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "dedupctl check of on_failed: retry in external mode"
grep -q "on_failed: retry is for transactional mode" "$WORK/check.out" || fail "check says: $(cat "$WORK/check.out")"
