#!/usr/bin/env bash
# dedupctl rerun (issue 21 §4): an operator's audited re-run of one key. The
# key's row goes, with who asked, why and its previous outcome kept in
# dedupd.reruns; the replayed topic then runs the handler once more for that
# key only (its neighbours absorbed): one more debit, one more ledger row.
# inspect shows the re-run while the key awaits its delivery and after;
# stats counts it; verify allows exactly one more effect per re-run.
# --emit-only publishes the key's outbox rows again and runs nothing.
# Refused, changing nothing: no --reason (2), an unknown key (1), a key
# already awaiting its re-run (1), a PENDING key (1), --emit-only with no
# outbox row (1).
. "$(dirname "$0")/lib.sh"

T="rerun_$$"
topic "$T" 1
"$KT" create -t "$T.events" -p 1 >/dev/null
export SEED_ACCOUNTS=2 INITIAL_BALANCE=100
write_config "$WORK/c.yaml" "$T"
for i in 1 2 3; do printf 'u1\t{"order_id":"o-%d","user_id":1,"amount":10}\n' "$i"; done | "$KT" produce -t "$T"
start d1 "$WORK/c.yaml"
wait_done "$T"
stop d1
balance() { sql "SELECT balance FROM account WHERE user_id = 1"; }
effects() { sql "SELECT count(*) FROM transfer_ledger WHERE idem_key = '$1'"; }
assert_eq "$(balance)" 70 "balance after the first run"

# rerun [ARGS...]: its exit code in RC, its output in $WORK/rerun.out
rerun() { RC=0; "$DEDUPCTL" rerun -c "$WORK/c.yaml" "$@" >"$WORK/rerun.out" 2>&1 || RC=$?; }
rerun o-1/PAY
assert_eq "$RC" 2 "rerun without --reason"
grep -q -- "--reason TEXT is required" "$WORK/rerun.out" || fail "no reason given for the refusal: $(cat "$WORK/rerun.out")"
rerun nope/PAY --reason "x"
assert_eq "$RC" 1 "rerun of an unknown key"

rerun o-1/PAY --reason "ticket 42: the bank lost the transfer" --by alice
cat "$WORK/rerun.out"
assert_eq "$RC" 0 "rerun o-1/PAY"
grep -q "re-run 1 of key o-1/PAY (was DONE) recorded" "$WORK/rerun.out" || fail "rerun did not say what it did"
grep -qF "dedupctl replay -c CONFIG -t $T --to-offset 0 --partitions 0" "$WORK/rerun.out" || fail "rerun did not print the replay"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE idem_key = 'o-1/PAY'")" 0 "o-1's row gone"
assert_eq "$(sql "SELECT generation || '|' || mode || '|' || requested_by || '|' || db_user || '|' || reason || '|' || prev_status || '|' || prev_response || '|' || prev_offset
                  FROM dedupd.reruns WHERE idem_key = 'o-1/PAY'")" \
        "1|reexecute|alice|$(sql "SELECT session_user")|ticket 42: the bank lost the transfer|DONE|OK: debited 10|0" "the audit row"
"$DEDUPCTL" inspect -c "$WORK/c.yaml" o-1/PAY >"$WORK/inspect1.out" || fail "inspect of a key awaiting its re-run exited $?"
grep -q "no record now: re-run 1, its next delivery runs the handler once more" "$WORK/inspect1.out" || fail "inspect: $(cat "$WORK/inspect1.out")"
grep -q "ticket 42" "$WORK/inspect1.out" || fail "inspect does not show the reason"
rerun o-1/PAY --reason "again"
assert_eq "$RC" 1 "rerun of a key already awaiting its re-run"

"$DEDUPCTL" replay -c "$WORK/c.yaml" -t "$T" --to-beginning >/dev/null
start d2 "$WORK/c.yaml"
wait_done "$T"
stop d2
assert_eq "$(balance)" 60 "balance: o-1 debited once more, o-2 and o-3 absorbed"
assert_eq "$(effects o-1/PAY)/$(effects o-2/PAY)/$(effects o-3/PAY)" "2/1/1" "ledger rows of o-1/o-2/o-3"
assert_eq "$(sql "SELECT status || '/' || attempts || '/' || response FROM dedupd.keys WHERE idem_key = 'o-1/PAY'")" "DONE/1/OK: debited 10" \
        "o-1's new generation"
"$DEDUPCTL" inspect -c "$WORK/c.yaml" o-1/PAY >"$WORK/inspect2.out"
grep -q "^status  *DONE" "$WORK/inspect2.out" && grep -q "ticket 42" "$WORK/inspect2.out" || fail "inspect after: $(cat "$WORK/inspect2.out")"
"$DEDUPCTL" stats -c "$WORK/c.yaml" >"$WORK/stats.out"
grep -A3 "re-runs (dedupctl rerun):" "$WORK/stats.out" | grep -q "reexecute.*1" || fail "stats: $(cat "$WORK/stats.out")"

RC=0; "$DEDUPCTL" verify -c "$WORK/c.yaml" --expect-caught-up >"$WORK/verify1.out" 2>&1 || RC=$?
assert_eq "$RC" 0 "verify after the re-run (o-1's second effect is the audited one)"
sql "INSERT INTO transfer_ledger (idem_key, user_id, amount) VALUES ('o-1/PAY', 1, 10)"
RC=0; "$DEDUPCTL" verify -c "$WORK/c.yaml" >"$WORK/verify2.out" 2>&1 || RC=$?
assert_eq "$RC" 1 "verify with a third effect of o-1"
grep -qF "two-effects: key o-1/PAY " "$WORK/verify2.out" || fail "verify does not name o-1: $(cat "$WORK/verify2.out")"
sql "DELETE FROM transfer_ledger WHERE ctid = (SELECT max(ctid) FROM transfer_ledger WHERE idem_key = 'o-1/PAY')"

# ---- --emit-only: o-2's outbox row, published before, goes out again --------------
sql "INSERT INTO dedupd.outbox (namespace, idem_key, topic, key, value, msg_id, sent_at)
     VALUES ('it-$ID', 'o-2/PAY', '$T.events', 'u1', 'debited o-2', 'o-2/PAY/0', now() - interval '1 hour')"
rerun o-3/PAY --emit-only --reason "resend"
assert_eq "$RC" 1 "rerun --emit-only of a key without outbox rows"
rerun o-2/PAY --emit-only --reason "the ledger service lost the event" --by bob
assert_eq "$RC" 0 "rerun --emit-only o-2/PAY"
grep -q "re-run 1 of key o-2/PAY (emit only) recorded: 1 outbox row published again" "$WORK/rerun.out" || fail "$(cat "$WORK/rerun.out")"
assert_eq "$(sql "SELECT count(*) FROM dedupd.outbox WHERE idem_key = 'o-2/PAY' AND sent_at IS NULL")" 1 "o-2's outbox row unsent"
start d3 "$WORK/c.yaml"
republished() { [[ $(sql "SELECT count(*) FROM dedupd.outbox WHERE idem_key = 'o-2/PAY' AND sent_at IS NOT NULL") == 1 ]]; }
poll 60 republished || fail "the relay did not publish o-2's row again"
stop d3
"$KT" dump -t "$T.events" >"$WORK/events"
assert_eq "$(grep -c "debited o-2" "$WORK/events")" 1 "o-2's event on $T.events"
grep -q "dedupd-msg-id=o-2/PAY/0\|o-2/PAY/0" "$WORK/events" || fail "the event lacks the identity it first went out with: $(cat "$WORK/events")"
assert_eq "$(effects o-2/PAY)/$(balance)" "1/60" "emit-only ran no effect"

# ---- a PENDING key is left alone --------------------------------------------------
sql "INSERT INTO dedupd.keys (namespace, idem_key, status, topic, partition, \"offset\", owner, lease_until)
     VALUES ('it-$ID', 'p-1/PAY', 'PENDING', '$T', 0, 9, 'someone:1:0', now() + interval '1 minute')"
rerun p-1/PAY --reason "stuck?"
assert_eq "$RC" 1 "rerun of a PENDING key"
grep -q "is PENDING" "$WORK/rerun.out" || fail "$(cat "$WORK/rerun.out")"
assert_eq "$(sql "SELECT count(*) FROM dedupd.reruns WHERE namespace = 'it-$ID'")" 2 "audit rows: one per re-run done, none for a refusal"
