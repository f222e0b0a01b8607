#!/usr/bin/env bash
# The crash-loop guard on RabbitMQ: a message whose handler aborts the process
# every time it runs, between neighbours, under a restarting supervisor (the
# test restarts dedupd each time it dies). The guard counts crashes by delivery
# number, and RabbitMQ has no offsets: dedupd numbers each queue's deliveries
# from the queue's next_offset in dedupd.offsets at each connection. A crashed
# batch never committed, so next_offset stays where it was, and the broker
# requeues every unacknowledged delivery at its place: the redelivery of the
# crashed range starts again at the same number, and the guard's ledger
# (dedupd.attempts) lines up with the same messages. After exactly
# retry.max_crashes crashes the message is dead-lettered to
# rabbitmq.dead_letter.exchange with the crash-loop reason, its key and its
# body; its neighbours take effect once; the queue drains. Then again with
# a kill between COMMIT and basic.ack that shifts the numbers by one.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rmq_lib.sh"
require_fault_points # case 2

Q="poison_$$"
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
      config: {crash_keys: boom/PAY}
    batch: {max_messages: 100, max_wait_ms: 200}
    retry: {max_attempts: 3, backoff_ms: 20, backoff_max_ms: 100, max_crashes: 3}
YAML
ORDERS="a b boom c d"
for o in $ORDERS; do printf '{"order_id":"%s"}\n' "$o"; done | rmq_publish "$Q" -H "trace: t-$$"
assert_eq "$(rmq_messages "$Q")" 5 "messages in the queue"

# where the next connection's numbering starts, and the guard's ledger (offset..until xattempts, alone or in a batch)
resume_at() { sql "SELECT coalesce(max(next_offset), 0) FROM dedupd.offsets WHERE topic = '$Q'"; }
ledger() {
        sql 'SELECT coalesce(string_agg("offset" || $$..$$ || until_offset || $$ x$$ || attempts || CASE WHEN single THEN $$ alone$$ ELSE $$ batch$$ END, $$, $$ ORDER BY "offset", single), $$-$$) FROM dedupd.attempts'
}
ledgers=()

# A supervisor, as systemd would be: restart dedupd whenever it dies.
restarts=0
while :; do
        start d1 "$WORK/c.yaml"
        for ((i = 0; i < 300; i++)); do
                kill -0 "${PIDS[d1]}" 2>/dev/null && [[ $(rmq_messages "$Q") != 0 ]] || break
                sleep 0.1
        done
        ((i < 300)) || fail "dedupd neither died nor drained $Q in 30 s"
        [[ $(rmq_messages "$Q") == 0 ]] && break
        rc=0; wait "${PIDS[d1]}" || rc=$?; unset "PIDS[d1]"
        restarts=$((restarts + 1))
        ledgers[restarts]=$(ledger)
        log "dedupd died (exit $rc), restart $restarts; numbering resumes at $(resume_at); crash ledger: ${ledgers[restarts]}"
        ((restarts <= 8)) || fail "crash loop not broken after $restarts restarts"
done
stop d1
grep -h "one message at a time\|crash loop" "$WORK/d1.log" | sed 's/^/    /' | head -n 6

# The positions line up: the crashed batch started at 0 (a b boom c d = 0..4);
# each restart numbered the redeliveries from the committed position, so boom
# was delivery 2 every time and its own crashes added up on one ledger row.
assert_eq "${ledgers[1]}" "0..5 x1 batch" "ledger after crash 1 (the batch of five)"
assert_eq "${ledgers[2]}" "0..5 x1 batch, 2..3 x1 alone" "ledger after crash 2 (a, b committed alone; boom alone at 2)"
assert_eq "${ledgers[3]}" "0..5 x1 batch, 2..3 x2 alone" "ledger after crash 3 (boom again at 2)"
assert_eq "$restarts" 3 "crashes before the crash loop was broken (retry.max_crashes)"
assert_eq "$(sql "SELECT string_agg(idem_key, ',' ORDER BY idem_key) FROM flaky_effects")" "a/PAY,b/PAY,c/PAY,d/PAY" "neighbours' effects, each once"
assert_eq "$(sql "SELECT count(*) FROM flaky_effects")" 4 "effects in all"
assert_eq "$(sql "SELECT count(*) FROM dedupd.attempts")" 0 "crash-loop ledger cleaned up"
assert_eq "$(rmq_messages "$Q")" 0 "messages left in $Q (ready or unacknowledged)"
assert_eq "$(rmq_messages "$Q.letters")" 1 "dead letters in $Q.letters"
rmq_dead_letters "$Q.letters" "$WORK/letters"
cat "$WORK/letters" | sed 's/^/    /'
grep -q '^header dedupd.reason=crashed or stalled dedupd 3 times (1 in a batch, 2 alone; crash loop; retry.max_crashes)$' "$WORK/letters" ||
        fail "boom not dead-lettered with the crash-loop reason"
assert_eq "$(grep -c '^header dedupd.key=boom/PAY$' "$WORK/letters")" 1 "the dead letter names its key"
assert_eq "$(grep -c '^body {"order_id":"boom"}$' "$WORK/letters")" 1 "the crashing message is the one dead-lettered, body unchanged"
assert_eq "$(grep -c "^header trace=t-$$\$" "$WORK/letters")" 1 "its own headers kept"
assert_eq "$(grep -c '^header dedupd.origin.offset=2$' "$WORK/letters")" 1 "dead-lettered at delivery number 2, where it crashed"
assert_eq "$(grep -c "^header dedupd.origin.topic=$Q\$" "$WORK/letters")" 1 "dedupd.origin.topic names the queue"
log "ok: crash loop broken after $restarts crashes; $(sql "SELECT sum(applied) || ' applied, ' || sum(dead_lettered) || ' dead-lettered, ' || max(next_offset) || ' deliveries committed' FROM dedupd.offsets WHERE topic = '$Q'")"

# ---- 2. the numbers shifted by a committed delivery the broker never heard acked ----
# The same poison, but the run that works the crashed range alone is killed
# between COMMIT and basic.ack (fault point after_commit, on b2's commit): b2
# comes back first and takes delivery number 2, the poison moves to 3. The
# guard must still absorb b2 (a duplicate, not a crash loop) and dead-letter
# the poison after exactly retry.max_crashes of its own crashes, at 3.
Q="poison2_$$"
rmq_define "{\"queues\":[{\"name\":\"$Q\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}},
  {\"name\":\"$Q.letters\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}}],
 \"bindings\":[{\"source\":\"$X\",\"vhost\":\"/\",\"destination\":\"$Q.letters\",\"destination_type\":\"queue\",\"routing_key\":\"$Q.dlq\",\"arguments\":{}}]}"
sed "s/- name: poison_$$\$/- name: $Q/; s|crash_keys: boom/PAY|crash_keys: boom2/PAY|" "$WORK/c.yaml" >"$WORK/c2.yaml"
for o in a2 b2 boom2 c2 d2; do printf '{"order_id":"%s"}\n' "$o"; done | rmq_publish "$Q"
ledgers=()
runs=0 crashes=0
while :; do
        runs=$((runs + 1))
        if ((runs == 2)); then DEDUPD_FAULT="after_commit:2" start d2 "$WORK/c2.yaml"; else start d2 "$WORK/c2.yaml"; fi
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
