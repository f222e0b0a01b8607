#!/usr/bin/env bash
# Kafka only (a named extra of the conformance suite, whose replies and
# outbox scenarios cover the first outcome, the ids and emitted-iff-committed):
# a failover to a replica that had none of the commits (keys, outbox rows,
# positions and effects lost) makes the topic apply again from the start, and
# every reply and every event goes out again with the id it had — a
# downstream that keeps ids drops the second copy.
. "$(dirname "$0")/../../integration/lib.sh"
. "$(dirname "$0")/../../integration/outbox_lib.sh"

T="pay_reply_$$" R="replies_$$"
topic "$T" 1
"$KT" create -t "$R" -p 1 >/dev/null
write_config "$WORK/c.yaml" "$T"
printf '%s\n' '{"order_id":"R1","user_id":9,"amount":10}' | "$KT" produce -t "$T" -H "reply-to=$R" -H correlation-id=c1
printf '%s\n' '{"order_id":"R2","user_id":9,"amount":5000}' | "$KT" produce -t "$T" -H "reply-to=$R" -H correlation-id=c2
start d1 "$WORK/c.yaml"
wait_done "$T"
# The caller timed out and retried both: the same requests, new correlation ids.
printf '%s\n' '{"order_id":"R1","user_id":9,"amount":10}' | "$KT" produce -t "$T" -H "reply-to=$R" -H correlation-id=c3
printf '%s\n' '{"order_id":"R2","user_id":9,"amount":5000}' | "$KT" produce -t "$T" -H "reply-to=$R" -H correlation-id=c4
wait_done "$T"
for ((i = 0; i < 100; i++)); do [[ $(produced "$R") == 4 ]] && break; sleep 0.1; done
stop d1
"$KT" dump -t "$R" >"$WORK/replies.txt"
assert_eq "$(produced "$R")" 4 "replies published"
before=$(kafka_outbox_ids "$WORK/replies.txt")

# A failover to a replica that had none of those commits: keys, replies,
# positions and the debit lost. The four messages apply again, and each reply
# goes out with the id it had.
lose_commits "it-$ID" "UPDATE account SET balance = 1000 WHERE user_id = 9; DELETE FROM transfer_ledger"
start d1b "$WORK/c.yaml"
wait_done "$T"
for ((i = 0; i < 100; i++)); do [[ $(produced "$R") == 8 ]] && break; sleep 0.1; done
stop d1b
"$KT" dump -t "$R" >"$WORK/replies2.txt"
assert_same_ids "$before" "$(kafka_outbox_ids "$WORK/replies2.txt")" "replies"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 9")" 990 "balance after the re-apply"
log "ok: every reply went out again with the id it had"

# The outbox, with the flaky handler emitting two events per effect.
E="events_$$" U="orders_$$"
topic "$U" 1
"$KT" create -t "$E" -p 1 >/dev/null
cat >"$WORK/e.yaml" <<YAML
namespace: it-$ID-emit
postgres: {conninfo: "$TEST_DSN"}
kafka: {bootstrap.servers: "$KAFKA_BOOTSTRAP", group.id: "grp-$ID-emit", group.instance.id: "emit-1", session.timeout.ms: "6000"}
outbox: {interval_ms: 200}
topics:
  - name: $U
    key: {subject: "{json:order_id}", action: SHIP}
    handler: {path: "$BUILD/tests/flaky.so", config: {emit_topic: "$E", emit_count: "2"}}
    batch: {max_messages: 10, max_wait_ms: 20}
YAML
for i in $(seq 1 30); do printf '{"order_id":"e%d"}\n' $((i % 20)); done | "$KT" produce -t "$U"
start d4 "$WORK/e.yaml"
wait_done "$U"
for ((i = 0; i < 100; i++)); do [[ $(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL") == 0 ]] && break; sleep 0.1; done
stop d4
"$KT" dump -t "$E" >"$WORK/events.txt"
assert_eq "$(produced "$E")" 40 "events published: two per effect"
before=$(kafka_outbox_ids "$WORK/events.txt")
assert_eq "$(sql "SELECT count(*) FROM flaky_effects")" 20 "effects"

# The same failover for the events: each goes out again with the id it had.
lose_commits "it-$ID-emit" "DELETE FROM flaky_effects"
start d5 "$WORK/e.yaml"
wait_done "$U"
for ((i = 0; i < 100; i++)); do [[ $(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL") == 0 ]] && break; sleep 0.1; done
stop d5
"$KT" dump -t "$E" >"$WORK/events2.txt"
assert_same_ids "$before" "$(kafka_outbox_ids "$WORK/events2.txt")" "events"
log "ok: every event went out again with the id it had"
