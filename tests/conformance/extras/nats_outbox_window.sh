#!/usr/bin/env bash
# NATS JetStream only (a named extra of the conformance suite, whose replies
# and outbox scenarios cover the first outcome, the ids and
# emitted-iff-committed): each outbox message goes out with its identity as
# Nats-Msg-Id, so the stream's duplicate window absorbs the relay publishing
# a row again, and a failover that lost the commits: the events written again
# are the ones the stream holds.
. "$(dirname "$0")/../../integration/lib.sh"
. "$(dirname "$0")/../../integration/nats_lib.sh"
. "$(dirname "$0")/../../integration/outbox_lib.sh"

E="events.$ID" U="ship.$ID"
"$NT" stream "$STREAM" "$E" "$U"

# The outbox, with the flaky handler emitting one event per effect to a subject.
SUBJ=$U CONSUMER="${DURABLE}-${U//./_}"
cat >"$WORK/e.yaml" <<YAML
namespace: it-$ID-emit
source: nats
postgres: {conninfo: "$TEST_DSN"}
nats: {url: "$NATS_URL", stream: $STREAM, durable: $DURABLE, ack_wait_ms: 2000}
outbox: {interval_ms: 200}
topics:
  - name: $U
    key: {subject: "{json:order_id}", action: SHIP}
    handler: {path: "$BUILD/tests/flaky.so", config: {emit_topic: "$E"}}
    batch: {max_messages: 10, max_wait_ms: 20}
YAML
for i in $(seq 1 30); do printf '{"order_id":"e%d"}\n' $((i % 20)); done | publish
start d4 "$WORK/e.yaml"
nats_done
for ((i = 0; i < 100; i++)); do [[ $(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL") == 0 ]] && break; sleep 0.1; done
# The relay publishes a row again (as after a crash between the PubAck and
# marking it sent): the stream answers Duplicate and keeps one message.
again=$(sql "UPDATE dedupd.outbox SET sent_at = NULL WHERE id = (SELECT min(id) FROM dedupd.outbox WHERE namespace = 'it-$ID-emit') RETURNING id")
wait_until 30 "row $again published again" sent "$again"
stop d4
"$NT" dump "$STREAM" "$E" >"$WORK/events.txt"
assert_eq "$(wc -l <"$WORK/events.txt")" 20 "events published: one per effect"
assert_eq "$(grep -oP 'dedupd.record.key=[^;\t]*' "$WORK/events.txt" | sort | uniq -d | wc -l)" 0 "keys emitted twice"
assert_eq "$(sql "SELECT count(*) FROM flaky_effects")" 20 "effects"
assert_eq "$(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL")" 0 "unsent outbox rows"
log "ok: a row published again absorbed"

# A failover to a replica that had none of those commits: the 20 effects
# apply again and their events are written again, with the ids they had —
# within the stream's duplicate window, it keeps the 20 it has.
nats_msg_ids "$WORK/events.txt" | sort >"$WORK/ids.before"
lose_commits "it-$ID-emit" "DELETE FROM flaky_effects" 1
start d5 "$WORK/e.yaml"
nats_done
for ((i = 0; i < 100; i++)); do [[ $(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL") == 0 ]] && break; sleep 0.1; done
stop d5
assert_eq "$(sql "SELECT count(*) FROM dedupd.outbox WHERE namespace = 'it-$ID-emit' AND sent_at IS NOT NULL")" 20 "events written again and acknowledged"
assert_eq "$(sql "SELECT count(*) FROM flaky_effects")" 20 "effects after the re-apply"
"$NT" dump "$STREAM" "$E" >"$WORK/events2.txt"
assert_eq "$(wc -l <"$WORK/events2.txt")" 20 "events in the stream after the re-apply"
assert_eq "$(nats_msg_ids "$WORK/events2.txt" | sort)" "$(cat "$WORK/ids.before")" "the stream's events and their ids"
log "ok: the events written again after the failover were absorbed by the stream's duplicate window"
