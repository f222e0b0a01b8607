#!/usr/bin/env bash
# The dead-letter topic exists before the first message needs it. A missing
# dead-letter topic (or consumed topic) is refused at start, naming it and the
# command that creates it; with dead_letter.create dedupd creates it, sized to
# hold whatever its topic holds, and the first dead letter lands there.
. "$(dirname "$0")/lib.sh"

T="dlqtopic_$$"
"$KT" create -t "$T" -p 1 >/dev/null # and no $T.dlq
write_config "$WORK/c.yaml" "$T"

rc=0; "$DEDUPCTL" check -c "$WORK/c.yaml" >"$WORK/check.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "dedupctl check exit code without the dead-letter topic"
grep -q "c.yaml:14:5: dead-letter topic $T.dlq (of topic $T) does not exist: .*kafka-topics.sh --bootstrap-server $KAFKA_BOOTSTRAP --create --topic $T.dlq" "$WORK/check.out" || fail "check says: $(cat "$WORK/check.out")"
rc=0; timeout 60 "$DEDUPD" -c "$WORK/c.yaml" >"$WORK/refused.log" 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupd exit code without the dead-letter topic"
grep -q "ERROR .*dead-letter topic $T.dlq (of topic $T) does not exist" "$WORK/refused.log" || fail "dedupd says: $(tail -n 5 "$WORK/refused.log")"
grep -q "assigned" "$WORK/refused.log" && fail "dedupd joined the group before refusing"

# A consumed topic that does not exist is refused the same way.
write_config "$WORK/m.yaml" "no_such_topic_$$"
rc=0; "$DEDUPCTL" check -c "$WORK/m.yaml" >"$WORK/m.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "dedupctl check exit code for a missing topic"
grep -q "topic no_such_topic_$$ does not exist on the broker: create it" "$WORK/m.out" || fail "check says: $(cat "$WORK/m.out")"
# The advice works with the project's own servers too (their tool is bin/kafka-topics, no .sh).
grep -q "with the project's own servers: scripts/services topic no_such_topic_$$ N" "$WORK/m.out" || fail "check's advice: $(cat "$WORK/m.out")"
grep -q "the tool is bin/kafka-topics in some installations" "$WORK/m.out" || fail "check's advice names no bin/kafka-topics"
[[ -x $DEDUPD_KAFKA_HOME/bin/kafka-topics ]] || fail "the project's Kafka has no bin/kafka-topics, as check's advice says"

# dead_letter.create: created at start, then used.
write_config "$WORK/d.yaml" "$T" "    dead_letter: {create: true}"
rc=0; "$DEDUPCTL" check -c "$WORK/d.yaml" >"$WORK/d.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "dedupctl check exit code with dead_letter.create"
grep -q "warning: dead-letter topic $T.dlq (of topic $T) does not exist yet: dedupd creates it at start" "$WORK/d.out" || fail "check says: $(cat "$WORK/d.out")"
printf '%s\n' '{"order_id":"o-1","user_id":1,"amount":5}' 'not json' '{"order_id":"o-2","user_id":2,"amount":5}' | "$KT" produce -t "$T"
start d "$WORK/d.yaml"
wait_done "$T" 60
stop d
grep -q "dead-letter topic $T.dlq created (dead_letter.create)" "$WORK/d.log" || fail "no creation logged"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 2 "orders applied"
"$KT" dump -t "$T.dlq" >"$WORK/dlq.txt"
grep -q "dedupd.reason=key: payload is not valid JSON" "$WORK/dlq.txt" || fail "not dead-lettered into the created topic: $(cat "$WORK/dlq.txt")"
size=$("$KT" config -t "$T.dlq" max.message.bytes)
((size >= 1000000 + 16384)) || fail "created with max.message.bytes=$size, too small for max_payload_bytes"
log "ok: created with max.message.bytes=$size"
