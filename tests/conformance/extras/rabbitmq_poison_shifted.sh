#!/usr/bin/env bash
# RabbitMQ only (a named extra of the conformance suite, whose poison
# scenario covers the crash-loop guard on every broker): RabbitMQ has no
# offsets, dedupd numbers each queue's deliveries from the queue's
# next_offset in dedupd.offsets at each connection. A kill between COMMIT and
# basic.ack shifts the numbers by one: the delivery committed but never acked
# comes back first and takes the poison's number, the poison moves up by one.
# The guard must still absorb it (a duplicate, not a crash loop) and
# dead-letter the poison after exactly retry.max_crashes of its own crashes.
. "$(dirname "$0")/../../integration/lib.sh"
. "$(dirname "$0")/../../integration/rmq_lib.sh"
require_fault_points

Q="poison2_$$"
X="poison_dlx_$$"
rmq_define "{\"queues\":[{\"name\":\"$Q\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}},
  {\"name\":\"$Q.letters\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}}],
 \"exchanges\":[{\"name\":\"$X\",\"vhost\":\"/\",\"type\":\"direct\",\"durable\":true,\"auto_delete\":false,\"internal\":false,\"arguments\":{}}],
 \"bindings\":[{\"source\":\"$X\",\"vhost\":\"/\",\"destination\":\"$Q.letters\",\"destination_type\":\"queue\",\"routing_key\":\"$Q.dlq\",\"arguments\":{}}]}"
cat >"$WORK/c.yaml" <<YAML
$(PREFETCH=100 rmq_config_head)
  dead_letter: {exchange: $X}
topics:
  - name: $Q
    key: {subject: "{json:order_id}", action: PAY}
    handler:
      path: "$BUILD/tests/flaky.so"
      config: {crash_keys: boom2/PAY}
    batch: {max_messages: 100, max_wait_ms: 200}
    retry: {max_attempts: 3, backoff_ms: 20, backoff_max_ms: 100, max_crashes: 3}
YAML


# where the next connection's numbering starts, and the guard's ledger (offset..until xattempts, alone or in a batch)
resume_at() { sql "SELECT coalesce(max(next_offset), 0) FROM dedupd.offsets WHERE topic = '$Q'"; }
ledger() {
        sql 'SELECT coalesce(string_agg("offset" || $$..$$ || until_offset || $$ x$$ || attempts || CASE WHEN single THEN $$ alone$$ ELSE $$ batch$$ END, $$, $$ ORDER BY "offset", single), $$-$$) FROM dedupd.attempts'
}
for o in a2 b2 boom2 c2 d2; do printf '{"order_id":"%s"}\n' "$o"; done | rmq_publish "$Q"
ledgers=()
runs=0 crashes=0
while :; do
        runs=$((runs + 1))
        if ((runs == 2)); then DEDUPD_FAULT="after_commit:2" start d2 "$WORK/c.yaml"; else start d2 "$WORK/c.yaml"; fi
        for ((i = 0; i < 300; i++)); do
                kill -0 "${PIDS[d2]}" 2>/dev/null && [[ $(rmq_messages "$Q") != 0 ]] || break
                sleep 0.1
        done
        ((i < 300)) || fail "dedupd neither died nor drained $Q in 30 s"
        [[ $(rmq_messages "$Q") == 0 ]] && break
        rc=0; wait "${PIDS[d2]}" || rc=$?; unset "PIDS[d2]"
        ((rc == 134)) && crashes=$((crashes + 1))
        ledgers[runs]=$(ledger)
        log "run $runs: dedupd died (exit $rc); numbering resumes at $(resume_at); crash ledger: ${ledgers[runs]}"
        ((runs <= 9)) || fail "crash loop not broken after $runs runs"
done
stop d2
# (b2's start at 1 is still there: it committed, but the kill came before the
# start was taken back; the committed position, 2, has passed it, and it is
# gone by the next run's end.)
assert_eq "${ledgers[2]}" "0..5 x1 batch, 1..2 x1 alone" "ledger after the kill between COMMIT and ack (a2, b2 committed alone)"
assert_eq "${ledgers[3]}" "0..5 x1 batch, 3..4 x1 alone" "ledger after boom2's first crash alone (b2 redelivered at 2, boom2 at 3)"
assert_eq "$crashes" 3 "boom2's crashes (exit 134) before it was dead-lettered (retry.max_crashes)"
assert_eq "$(sql "SELECT string_agg(idem_key, ',' ORDER BY idem_key) FROM flaky_effects WHERE idem_key LIKE '%2/PAY'")" "a2/PAY,b2/PAY,c2/PAY,d2/PAY" "neighbours' effects, each once"
assert_eq "$(sql "SELECT sum(duplicates) || '/' || sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$Q'")" "1/1" "duplicates (b2 redelivered) / dead-lettered"
assert_eq "$(sql "SELECT count(*) FROM dedupd.attempts")" 0 "crash-loop ledger cleaned up"
rmq_dead_letters "$Q.letters" "$WORK/letters2"
assert_eq "$(grep -c '^body' "$WORK/letters2")" 1 "dead letters in $Q.letters"
assert_eq "$(grep -c '^body {"order_id":"boom2"}$' "$WORK/letters2")" 1 "the crashing message is the one dead-lettered"
assert_eq "$(grep -c '^header dedupd.origin.offset=3$' "$WORK/letters2")" 1 "dead-lettered at delivery number 3 (shifted by b2)"
grep -q '^header dedupd.reason=crashed or stalled dedupd 3 times (1 in a batch, 2 alone; crash loop; retry.max_crashes)$' "$WORK/letters2" ||
        fail "boom2 not dead-lettered with the crash-loop reason: $(cat "$WORK/letters2")"
log "ok: with the numbers shifted by one unacknowledged commit, the guard still absorbed b2 and broke boom2's loop after $crashes crashes"
