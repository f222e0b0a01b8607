#!/usr/bin/env bash
# NATS JetStream: replies and the outbox publish through JetStream. A
# duplicate's reply carries the first outcome to the subject its reply-to
# header names; an outbox event exists if and only if its effect committed,
# across a kill after COMMIT (before the relay ran) and one before COMMIT.
# Each goes out with its identity as Nats-Msg-Id, so the stream's duplicate
# window absorbs the relay publishing a row again, and a failover that lost
# the commits: the events written again are the ones the stream holds.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"
. "$(dirname "$0")/outbox_lib.sh"
require_fault_points

R="replies.$ID" E="events.$ID" U="ship.$ID"
"$NT" stream "$STREAM" "$SUBJ" "$DLQ_SUBJ" "$R" "$E" "$U"
write_nats_config "$WORK/c.yaml"
echo '{"order_id":"R1","user_id":9,"amount":10}' | publish "reply-to:$R" correlation-id:c1
echo '{"order_id":"R2","user_id":9,"amount":5000}' | publish "reply-to:$R" correlation-id:c2
echo '{"order_id":"R1","user_id":9,"amount":10}' | publish "reply-to:$R" correlation-id:c3
echo '{"order_id":"R2","user_id":9,"amount":5000}' | publish "reply-to:$R" correlation-id:c4
start d1 "$WORK/c.yaml"
nats_done
for ((i = 0; i < 100; i++)); do [[ $("$NT" dump "$STREAM" "$R" | wc -l) == 4 ]] && break; sleep 0.1; done
stop d1
"$NT" dump "$STREAM" "$R" >"$WORK/replies.txt"
cat "$WORK/replies.txt"
assert_eq "$(wc -l <"$WORK/replies.txt")" 4 "replies published"
assert_eq "$(grep -cP '(^|[;\t])correlation-id=c[13][;\t].*OK: debited 10$' "$WORK/replies.txt")" 2 "R1's first response, to the first ask and to the duplicate"
assert_eq "$(grep -cP '(^|[;\t])correlation-id=c[24][;\t].*insufficient balance$' "$WORK/replies.txt")" 2 "R2's first rejection, to the first ask and to the duplicate"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 9")" 990 "balance"
assert_eq "$(nats_msg_ids "$WORK/replies.txt" | awk '$1 != $2 || $1 !~ /^[0-9a-f]{64}$/' | wc -l)" 0 "replies whose Nats-Msg-Id is not their derived dedupd.outbox.id"
assert_eq "$(nats_msg_ids "$WORK/replies.txt" | sort -u | wc -l)" 4 "distinct reply ids (a duplicate's reply is its own message)"

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
DEDUPD_FAULT=after_commit:1 start d2 "$WORK/e.yaml"
rc=0; wait "${PIDS[d2]}" || rc=$?; unset "PIDS[d2]"
assert_eq "$rc" 137 "killed at after_commit"
committed=$(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL")
((committed > 0)) || fail "no unsent outbox rows after the crash"
assert_eq "$("$NT" dump "$STREAM" "$E" | wc -l)" 0 "events published before the relay ran"
DEDUPD_FAULT=before_commit:1 start d3 "$WORK/e.yaml"
rc=0; wait "${PIDS[d3]}" || rc=$?; unset "PIDS[d3]"
assert_eq "$rc" 137 "killed at before_commit"
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
assert_eq "$(nats_msg_ids "$WORK/events.txt" | awk '$1 != $2 || $1 !~ /^[0-9a-f]{64}$/' | wc -l)" 0 "events whose Nats-Msg-Id is not their derived dedupd.outbox.id"
log "ok: emitted iff committed, across a crash after COMMIT and one before it; a row published again absorbed"

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
