#!/usr/bin/env bash
# NATS JetStream: replies and the outbox publish through JetStream. A
# duplicate's reply carries the first outcome to the subject its reply-to
# header names; an outbox event exists if and only if its effect committed,
# across a kill after COMMIT (before the relay ran) and one before COMMIT.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"
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
stop d4
"$NT" dump "$STREAM" "$E" >"$WORK/events.txt"
assert_eq "$(wc -l <"$WORK/events.txt")" 20 "events published: one per effect"
assert_eq "$(grep -oP 'dedupd.record.key=[^;\t]*' "$WORK/events.txt" | sort | uniq -d | wc -l)" 0 "keys emitted twice"
assert_eq "$(sql "SELECT count(*) FROM flaky_effects")" 20 "effects"
assert_eq "$(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL")" 0 "unsent outbox rows"
grep -qP '(^|[;\t])dedupd.outbox.id=' "$WORK/events.txt" || fail "events carry no dedupd.outbox.id"
log "ok: emitted iff committed, across a crash after COMMIT and one before it"
