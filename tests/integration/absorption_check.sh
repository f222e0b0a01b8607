#!/usr/bin/env bash
# The continuous absorption check (issue 21 §5): dedupd samples each topic's
# keys every absorption_check.interval and checks them against the handler's
# declared evidence (transfer_ledger), as dedupctl verify does once. After a
# clean run the gauges say every sampled DONE key has its one effect and no
# violation; then a second effect is written for one key by hand and another
# key's effect deleted, and the next check reports 2 violations, naming both
# keys in an ERROR line, without stopping consumption (a later batch still
# commits).
. "$(dirname "$0")/lib.sh"

T="absorb_$$"
topic "$T" 2
export SEED_ACCOUNTS=20 INITIAL_BALANCE=30
write_config "$WORK/c.yaml" "$T" "absorption_check: {interval: 1s, sample: 1000}
http: {listen: \"127.0.0.1:0\"}"
# 60 orders of 10 by 20 users with 30 each: 60 applied... and duplicates of each
{ for i in $(seq 1 80); do u=$((i % 20 + 1)); printf 'u%d\t{"order_id":"o-%d","user_id":%d,"amount":10}\n' "$u" "$i" "$u"; done; } >"$WORK/w.txt"
"$KT" produce -t "$T" <"$WORK/w.txt"
"$KT" produce -t "$T" <"$WORK/w.txt"
start d1 "$WORK/c.yaml"
wait_done "$T"
ADDR=$(metrics_addr d1)
metric() { curl -s "http://$ADDR/metrics" | awk -v m="$1{topic=\"$T\"}" '$1 == m {print $2}'; }
checked_after() { local at; at=$(metric dedupd_absorption_check_timestamp_seconds); [[ -n $at ]] && awk -v a="$at" -v b="$1" 'BEGIN {exit !(a > b)}'; }
poll 30 checked_after 0 || fail "no absorption check in 30 s"
done_keys=$(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'DONE'")
failed_keys=$(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'FAILED'")
assert_eq "$done_keys/$failed_keys" "60/20" "DONE/FAILED keys"
poll 10 test "$(metric dedupd_absorption_sampled_keys)" = 60 || true
assert_eq "$(metric dedupd_absorption_sampled_keys)" 60 "sampled DONE keys (the sample covers this small table)"
assert_eq "$(metric dedupd_absorption_effects)" 60 "their effects"
assert_eq "$(metric dedupd_absorption_violations)" 0 "violations after a clean run"

sql "INSERT INTO transfer_ledger (idem_key, user_id, amount) SELECT idem_key, user_id, amount FROM transfer_ledger WHERE idem_key = 'o-1/PAY'"
sql "DELETE FROM transfer_ledger WHERE idem_key = 'o-2/PAY'"
now=$(date +%s)
poll 30 checked_after "$now" || fail "no absorption check after the tampering"
poll 10 test "$(metric dedupd_absorption_violations)" = 2 || true
assert_eq "$(metric dedupd_absorption_violations)" 2 "violations: a second effect, a missing one"
assert_eq "$(metric dedupd_absorption_effects)" 60 "effects: one more, one less"
grep -E "ERROR +\[absorption\] topic $T: 2 of 80 sampled keys break the one-effect rule in transfer_ledger\(idem_key\): o-1/PAY \(DONE, 2 effects\), o-2/PAY \(DONE, 0 effects\)" "$WORK/d1.log" ||
        fail "no ERROR naming both keys: $(grep absorption "$WORK/d1.log" | tail -3)"
printf 'u1\t{"order_id":"o-new","user_id":1,"amount":0}\n' | "$KT" produce -t "$T"
wait_done "$T"
stop d1
RC=0
"$DEDUPCTL" verify -c "$WORK/c.yaml" >"$WORK/verify.out" 2>&1 || RC=$?
assert_eq "$RC" 1 "verify agrees: anomalies"
grep -q "o-1/PAY" "$WORK/verify.out" && grep -q "o-2/PAY" "$WORK/verify.out" || fail "verify: $(cat "$WORK/verify.out")"
