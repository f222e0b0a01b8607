#!/usr/bin/env bash
# Fault 7, slow handler: a batch that runs past batch.timeout_ms is aborted by
# dedupd's own watchdog (librdkafka 2.0.2 does not reliably notice a blown
# max.poll.interval.ms): slow SQL is cancelled and retried, then dead-lettered
# after the retry budget; a handler stuck outside SQL ends the process (exit 4),
# and the crash-loop guard dead-letters that message after retry.max_crashes.
. "$(dirname "$0")/../../integration/lib.sh"

T="fault_slow_$$"
topic "$T" 1
cat >"$WORK/c.yaml" <<YAML
namespace: it-$ID
postgres: {conninfo: "$TEST_DSN"}
kafka:
  bootstrap.servers: "$KAFKA_BOOTSTRAP"
  group.id: "grp-$ID"
  group.instance.id: "slow-1"
  session.timeout.ms: "6000"
topics:
  - name: $T
    key: {subject: "{json:order_id}", action: PAY}
    handler:
      path: "$BUILD/tests/flaky.so"
      config: {slow_sql_keys: slowsql/PAY, hang_keys: hang/PAY, sleep_s: "60"}
    batch: {max_messages: 100, max_wait_ms: 20, timeout_ms: 1000}
    retry: {max_attempts: 2, backoff_ms: 20, backoff_max_ms: 100, max_crashes: 1}
YAML
for o in a slowsql b hang c; do printf '{"order_id":"%s"}\n' "$o"; done | "$KT" produce -t "$T"

restarts=0 stalls=0
while :; do
        start d1 "$WORK/c.yaml"
        while kill -0 "${PIDS[d1]}" 2>/dev/null && [[ $(progressed "$T") != 5 ]]; do sleep 0.1; done
        [[ $(progressed "$T") == 5 ]] && break
        rc=0; wait "${PIDS[d1]}" || rc=$?; unset "PIDS[d1]"
        restarts=$((restarts + 1))
        ((rc == 4)) && stalls=$((stalls + 1))
        log "dedupd exited $rc, restart $restarts"
        ((restarts <= 6)) || fail "stall loop not broken after $restarts restarts"
done
stop d1

assert_eq "$(sql "SELECT string_agg(idem_key, ',' ORDER BY idem_key) FROM flaky_effects")" "a/PAY,b/PAY,c/PAY" "effects, each once"
"$KT" dump -t "$T.dlq" >"$WORK/dlq.txt"
grep -q 'dedupd.reason=handler left the transaction aborted (an SQL error) 2 times' "$WORK/dlq.txt" || fail "slow SQL not dead-lettered after its retries"
grep -q '"order_id":"slowsql"' "$WORK/dlq.txt" || fail "slowsql not in the dead-letter topic"
grep -q 'dedupd.reason=crashed or stalled dedupd' "$WORK/dlq.txt" || fail "the hung handler was not dead-lettered"
grep -q '"order_id":"hang"' "$WORK/dlq.txt" || fail "hang not in the dead-letter topic"
grep -q "cancelling its SQL" "$WORK/d1.log" || fail "the watchdog never cancelled"
((stalls >= 1)) || fail "the watchdog never ended a stuck process (exit 4)"
log "ok: watchdog cancelled slow SQL and ended $stalls stuck process(es)"
assert_eq "$(kafka_lag "$T")" 0 "Kafka consumer lag"
