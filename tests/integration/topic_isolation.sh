#!/usr/bin/env bash
# One topic's trouble stops only that topic. Two topics in one process; the
# dead-letter topic of the first is deleted while dedupd runs, and a message
# that must be dead-lettered arrives on it: that topic's batch keeps failing.
# Before the fix the consumer loop stayed inside it and the healthy topic
# applied nothing. Now the stuck topic pauses itself, says so at ERROR, and
# the other keeps flowing; once the dead-letter topic is back, the stuck one
# drains too, with nothing lost.
. "$(dirname "$0")/lib.sh"

A="iso_stuck_$$" B="iso_healthy_$$"
topic "$A" 1
topic "$B" 1
cat >"$WORK/c.yaml" <<YAML
namespace: it-$ID
postgres: {conninfo: "$TEST_DSN", retry_max_ms: 1000}
kafka:
  bootstrap.servers: "$KAFKA_BOOTSTRAP"
  group.id: "grp-$ID"
  session.timeout.ms: "6000"
  topic.metadata.refresh.interval.ms: "1000"
topics:
  - name: $A
    key: {subject: "{json:order_id}", action: SHIP}
    handler: {path: "$BUILD/tests/flaky.so"}
    batch: {max_messages: 100, max_wait_ms: 20}
    retry: {backoff_ms: 100, backoff_max_ms: 1000}
  - name: $B
    key: {subject: "{json:order_id}", action: PAY}
    handler: {path: "$BUILD/transfer.so", config: {seed_accounts: "50", initial_balance: "1000"}}
    batch: {max_messages: 100, max_wait_ms: 20}
YAML
start d "$WORK/c.yaml"
for ((i = 0; i < 300; i++)); do grep -q "assigned $B/" "$WORK/d.log" && break; sleep 0.1; done
"$KT" delete -t "$A.dlq" || fail "could not delete $A.dlq"
log "deleted $A.dlq while dedupd runs"
{ echo "not json"; for i in $(seq 1 20); do printf '{"order_id":"a-%d"}\n' "$i"; done; } | "$KT" produce -t "$A"
for i in $(seq 1 50); do printf '{"order_id":"b-%d","user_id":%d,"amount":1}\n' "$i" $((i % 50 + 1)); done | "$KT" produce -t "$B"

applied=0
for ((i = 0; i < 600; i++)); do
        applied=$(sql "SELECT count(*) FROM transfer_ledger")
        ((applied == 50)) && break
        sleep 0.1
done
assert_eq "$applied" 50 "orders of the healthy topic applied while the other is stuck"
assert_eq "$(sql "SELECT count(*) FROM flaky_effects")" 0 "orders of the stuck topic applied (none: they wait behind the dead letter)"
for ((i = 0; i < 600; i++)); do grep -q "ERROR \[topic:$A\] stuck:" "$WORK/d.log" && break; sleep 0.1; done
grep -q "ERROR \[topic:$A\] stuck: the batch from partition 0 offset 0 has failed" "$WORK/d.log" || fail "no ERROR for the stuck topic: $(grep "$A" "$WORK/d.log" | tail -n 3)"
grep -q "topic $A: paused fetching: its batch is in backoff" "$WORK/d.log" || fail "the stuck topic did not pause itself"
log "ok: $(grep -m1 "stuck:" "$WORK/d.log" | cut -c 1-200)"

"$KT" create -t "$A.dlq" -p 1 >/dev/null
log "recreated $A.dlq"
wait_done "$A" 120
wait_done "$B" 30
stop d
assert_eq "$(sql "SELECT count(DISTINCT idem_key) FROM flaky_effects")" 20 "orders of the formerly stuck topic applied"
"$KT" dump -t "$A.dlq" >"$WORK/dlq.txt"
grep -q "dedupd.reason=key: payload is not valid JSON" "$WORK/dlq.txt" || fail "the bad message is not in the recreated dead-letter topic"
assert_eq "$(kafka_lag "$A")" 0 "Kafka lag of the formerly stuck topic"
assert_eq "$(kafka_lag "$B")" 0 "Kafka lag of the healthy topic"
