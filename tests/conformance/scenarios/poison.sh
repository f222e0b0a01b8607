#!/usr/bin/env bash
# Poison: a message whose handler aborts the process every time it runs,
# between neighbours, under a restarting supervisor (the test restarts
# dedupd each time it dies). The crash-loop guard counts its crashes by the
# message's place, first in its batch, then alone; after exactly
# retry.max_crashes it is dead-lettered with the crash-loop reason, its key,
# its body and its headers, at its place; its neighbours take effect once;
# nothing is left unacknowledged.
. "$(dirname "$0")/../lib.sh"

b_setup poison 1
cat >"$WORK/c.yaml" <<YAML
$(PREFETCH=100 b_head)
topics:
  - name: $NAME_B
    key: {subject: "{json:order_id}", action: PAY}
    handler:
      path: "$BUILD/tests/flaky.so"
      config: {crash_keys: boom/PAY}
    batch: {max_messages: 100, max_wait_ms: 200}
    retry: {max_attempts: 3, backoff_ms: 20, backoff_max_ms: 100, max_crashes: 3}
YAML
for o in a b boom c d; do printf '{"order_id":"%s"}\n' "$o"; done | b_produce "trace:t-$$"
assert_eq "$(b_count)" 5 "messages produced"

# the guard's ledger: offset..until xattempts, alone or in a batch
ledger() {
        sql 'SELECT coalesce(string_agg("offset" || $$..$$ || until_offset || $$ x$$ || attempts || CASE WHEN single THEN $$ alone$$ ELSE $$ batch$$ END, $$, $$ ORDER BY "offset", single), $$-$$) FROM dedupd.attempts'
}
# at N: the offset (or stream sequence, or delivery number) of the Nth message
at() { b_place "$1" | cut -d' ' -f3; }
ledgers=()

# A supervisor, as systemd would be: restart dedupd whenever it dies.
restarts=0
while :; do
        start d1 "$WORK/c.yaml"
        for ((i = 0; i < 300; i++)); do
                kill -0 "${PIDS[d1]}" 2>/dev/null && ! b_done || break
                sleep 0.1
        done
        ((i < 300)) || fail "dedupd neither died nor finished in 30 s"
        b_done && break
        rc=0; wait "${PIDS[d1]}" || rc=$?; unset "PIDS[d1]"
        restarts=$((restarts + 1))
        ledgers[restarts]=$(ledger)
        log "dedupd died (exit $rc), restart $restarts; crash ledger: ${ledgers[restarts]}"
        ((restarts <= 8)) || fail "crash loop not broken after $restarts restarts"
done
stop d1
grep -h "one message at a time\|crash loop" "$WORK/d1.log" | sed 's/^/    /' | head -n 6

# The crashed batch held all five; each restart worked the range again, boom
# alone at its own place, and its own crashes added up on one ledger row.
batch="$(at 1)..$(($(at 5) + 1)) x1 batch"
assert_eq "${ledgers[1]}" "$batch" "ledger after crash 1 (the batch of five)"
assert_eq "${ledgers[2]}" "$batch, $(at 3)..$(($(at 3) + 1)) x1 alone" "ledger after crash 2 (a, b committed alone; boom alone)"
assert_eq "${ledgers[3]}" "$batch, $(at 3)..$(($(at 3) + 1)) x2 alone" "ledger after crash 3 (boom again)"
assert_eq "$restarts" 3 "crashes before the crash loop was broken (retry.max_crashes)"
assert_eq "$(sql "SELECT string_agg(idem_key, ',' ORDER BY idem_key) FROM flaky_effects")" "a/PAY,b/PAY,c/PAY,d/PAY" "neighbours' effects, each once"
assert_eq "$(sql "SELECT count(*) FROM dedupd.attempts")" 0 "crash-loop ledger cleaned up"
b_check_acked
b_dead_letters "$WORK/letters"
cat "$WORK/letters"
assert_eq "$(wc -l <"$WORK/letters")" 1 "dead letters"
body=$(dead_letter_of "$WORK/letters" "$(b_origin 3)" "crashed or stalled dedupd 3 times (1 in a batch, 2 alone; crash loop; retry.max_crashes)") ||
        fail "boom not dead-lettered at its place with the crash-loop reason"
assert_eq "$body" '{"order_id":"boom"}' "the crashing message is the one dead-lettered, body unchanged"
assert_eq "$(grep -caE "(^|;)dedupd\.key=boom/PAY[;$TAB]" "$WORK/letters")" 1 "the dead letter names its key"
assert_eq "$(grep -caE "(^|;)trace=t-$$[;$TAB]" "$WORK/letters")" 1 "its own headers kept"
log "ok: crash loop broken after $restarts crashes; $(sql "SELECT sum(applied) || ' applied, ' || sum(dead_lettered) || ' dead-lettered' FROM dedupd.offsets WHERE topic = '$NAME_B'")"
