#!/usr/bin/env bash
# Fault 8, poison messages: a handler that fails on one key every time is
# dead-lettered after the retry budget and the partition moves on; a handler
# that crashes the process on one key is detected as a crash loop and
# dead-lettered after exactly retry.max_crashes crashes that include it (not
# more: isolating it does not start a fresh count), with its key in the dead
# letter, instead of looping forever.
. "$(dirname "$0")/../../integration/lib.sh"

T="fault_poison_$$"
topic "$T" 1
cat >"$WORK/c.yaml" <<YAML
namespace: it-$ID
postgres: {conninfo: "$TEST_DSN"}
kafka:
  bootstrap.servers: "$KAFKA_BOOTSTRAP"
  group.id: "grp-$ID"
  group.instance.id: "poison-1"   # static membership: a restart gets its partitions back at once
  session.timeout.ms: "6000"
topics:
  - name: $T
    key: {subject: "{json:order_id}", action: PAY}
    handler:
      path: "$BUILD/tests/flaky.so"
      config: {crash_keys: boom/PAY, retry_keys: poison/PAY}
    batch: {max_messages: 100, max_wait_ms: 20}
    retry: {max_attempts: 3, backoff_ms: 20, backoff_max_ms: 100, max_crashes: 3}
YAML
for o in a boom b poison c; do printf '{"order_id":"%s"}\n' "$o"; done | "$KT" produce -t "$T"

# A supervisor, as systemd would be: restart dedupd whenever it dies.
restarts=0
while :; do
        start d1 "$WORK/c.yaml"
        while kill -0 "${PIDS[d1]}" 2>/dev/null && [[ $(progressed "$T") != 5 ]]; do sleep 0.1; done
        [[ $(progressed "$T") == 5 ]] && break
        rc=0; wait "${PIDS[d1]}" || rc=$?; unset "PIDS[d1]"
        restarts=$((restarts + 1))
        log "dedupd died (exit $rc), restart $restarts"
        ((restarts <= 8)) || fail "crash loop not broken after $restarts restarts"
done
stop d1

assert_eq "$(sql "SELECT string_agg(idem_key, ',' ORDER BY idem_key) FROM flaky_effects")" "a/PAY,b/PAY,c/PAY" "effects, each once"
"$KT" dump -t "$T.dlq" >"$WORK/dlq.txt"
grep -q 'dedupd.reason=crashed or stalled dedupd 3 times (1 in a batch, 2 alone; crash loop' "$WORK/dlq.txt" || fail "boom not dead-lettered as a crash loop: $(cat "$WORK/dlq.txt")"
grep -q 'dedupd.key=boom/PAY' "$WORK/dlq.txt" || fail "the crash-loop dead letter does not name its key"
grep -q 'dedupd.reason=handler returned RETRY 3 times' "$WORK/dlq.txt" || fail "poison not dead-lettered after its retry budget"
grep -q '"order_id":"boom"' "$WORK/dlq.txt" || fail "the crashing message is not the one dead-lettered"
assert_eq "$(sql "SELECT count(*) FROM dedupd.attempts")" 0 "crash-loop ledger cleaned up"
assert_eq "$restarts" 3 "crashes before the crash loop was broken (retry.max_crashes)"
log "ok: crash loop broken after $restarts crashes"
assert_eq "$(kafka_lag "$T")" 0 "Kafka consumer lag"
