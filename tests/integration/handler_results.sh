#!/usr/bin/env bash
# Handler results beyond OK: RETRY is retried with backoff and dead-lettered
# after the budget; a key that recovers within the budget is applied once;
# REJECT after writing is rolled back to the message's savepoint; a handler
# that leaves the transaction aborted is treated as RETRY, never committed.
. "$(dirname "$0")/lib.sh"

T="pay_results_$$"
topic "$T" 1
cat >"$WORK/c.yaml" <<YAML
namespace: it-$ID
postgres: {conninfo: "$TEST_DSN"}
kafka: {bootstrap.servers: "$KAFKA_BOOTSTRAP", group.id: "grp-$ID"}
topics:
  - name: $T
    key: {subject: "{json:order_id}", action: PAY}
    handler:
      path: "$BUILD/tests/flaky.so"
      config:
        retry_keys: poison/PAY
        flap_keys: flap/PAY
        write_reject_keys: wtr/PAY
        sql_error_keys: sqlerr/PAY
    batch: {max_messages: 100, max_wait_ms: 50}
    retry: {max_attempts: 3, backoff_ms: 20, backoff_max_ms: 100}
YAML
for o in a poison flap wtr sqlerr b; do printf '{"order_id":"%s"}\n' "$o"; done | "$KT" produce -t "$T"
start d1 "$WORK/c.yaml"
wait_done "$T"
stop d1

assert_eq "$(sql "SELECT string_agg(idem_key || '=' || status, ',' ORDER BY idem_key) FROM dedupd.keys")" \
        "a/PAY=DONE,b/PAY=DONE,flap/PAY=DONE,wtr/PAY=FAILED" "recorded outcomes"
assert_eq "$(sql "SELECT string_agg(idem_key, ',' ORDER BY idem_key) FROM flaky_effects")" \
        "a/PAY,b/PAY,flap/PAY" "effects (the rejected write rolled back, none doubled)"
"$KT" dump -t "$T.dlq" >"$WORK/dlq.txt"
assert_eq "$(grep -c 'dedupd.reason=handler returned RETRY 3 times' "$WORK/dlq.txt")" 1 "dead-lettered after the retry budget"
assert_eq "$(grep -c 'dedupd.reason=handler left the transaction aborted (an SQL error) 3 times' "$WORK/dlq.txt")" 1 \
        "an SQL error dead-lettered after the retry budget, with what it was"
grep -q '"order_id":"poison"' "$WORK/dlq.txt" || fail "poison not in the dead-letter topic"
grep -q '"order_id":"sqlerr"' "$WORK/dlq.txt" || fail "sqlerr not in the dead-letter topic"
grep -q "left the transaction aborted" "$WORK/d1.log" || fail "the aborted transaction was not reported"
assert_eq "$(kafka_lag "$T")" 0 "Kafka consumer lag"
