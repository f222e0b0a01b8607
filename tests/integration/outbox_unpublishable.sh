#!/usr/bin/env bash
# Kafka: an outbox row that can never be published — a reply to a topic that
# does not exist (the broker creates none) — among good ones. Every good reply
# arrives exactly once and none waits behind it; no topic pauses; the bad row
# is retried, given up with its reason after outbox.max_failures, counted,
# listed by dedupctl outbox list, and does not count toward
# limits.outbox_backlog; dedupctl outbox retry publishes it once its topic
# exists, dedupctl outbox drop deletes one. Sent rows go after outbox.keep.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/outbox_lib.sh"

T="pay_unpub_$$" R="replies_unpub_$$" B="no_such_topic_$$" B2="nor_this_$$"
topic "$T" 1
"$KT" create -t "$R" -p 1 >/dev/null
OUTBOX_KEEP=1s
write_config "$WORK/c.yaml" "$T" "$(outbox_settings)
limits:
  outbox_backlog: 2"
order() { printf '{"order_id":"u-%d","user_id":%d,"amount":10}\n' "$1" $(($1 % 50 + 1)); }
replies() { "$KT" dump -t "$R" >"$WORK/replies.txt"; grep -c '^0 ' "$WORK/replies.txt" || true; }
distinct_replies() { grep -o '^  dedupd.key=.*' "$WORK/replies.txt" | sort -u | wc -l; }

# 20 good, the bad one, 20 good: one batch, one relay round.
for i in $(seq 1 20); do order "$i"; done | "$KT" produce -t "$T" -H "reply-to=$R" -H correlation-id=c
order 1000 | "$KT" produce -t "$T" -H "reply-to=$B" -H correlation-id=c
for i in $(seq 21 40); do order "$i"; done | "$KT" produce -t "$T" -H "reply-to=$R" -H correlation-id=c
start d1 "$WORK/c.yaml"
metrics_of d1
wait_done "$T"
wait_until 60 "the relay to settle every row, one given up" settled 1
BAD=$(row_to "$B")
assert_given_up "$BAD" "$B.*(Unknown topic|not available)"
assert_eq "$(replies)" 40 "replies in $R"
assert_eq "$(distinct_replies)" 40 "distinct replies (each good reply exactly once)"
assert_metric dedupd_outbox_given_up 1
assert_metric dedupd_outbox_given_up_total 1
assert_metric dedupd_outbox_publish_failures_total 3
assert_metric dedupd_outbox_published_total 40
assert_metric dedupd_outbox_backlog 0
grep -q "row $BAD to $B given up after 3 failed publishes" "$WORK/d1.log" || fail "no ERROR line for the given-up row"
assert_eq "$(grep -c "row $BAD to $B given up" "$WORK/d1.log")" 1 "ERROR lines for the given-up row"

# A second bad row: with the first one given up it is alone in the backlog
# (1 < limits.outbox_backlog 2), so no topic pauses while it is retried.
for i in $(seq 41 50); do order "$i"; done | "$KT" produce -t "$T" -H "reply-to=$R" -H correlation-id=c
order 2000 | "$KT" produce -t "$T" -H "reply-to=$B2" -H correlation-id=c
for i in $(seq 51 60); do order "$i"; done | "$KT" produce -t "$T" -H "reply-to=$R" -H correlation-id=c
wait_done "$T"
wait_until 60 "the relay to settle every row, two given up" settled 2
BAD2=$(row_to "$B2")
assert_eq "$(replies)" 60 "replies in $R"
assert_eq "$(distinct_replies)" 60 "distinct replies"
assert_no_pause d1

# The topic is made: retried, the row is published, exactly once.
"$KT" create -t "$B" -p 1 >/dev/null
retry_until_sent "$BAD"
assert_eq "$(produced "$B")" 1 "records in $B"
"$DEDUPCTL" outbox drop -c "$WORK/c.yaml" "$BAD2" >"$WORK/drop.out" || fail "dedupctl outbox drop exited $?"
grep -q "^row $BAD2: dropped" "$WORK/drop.out" || fail "dedupctl outbox drop: $(cat "$WORK/drop.out")"
rc=0; "$DEDUPCTL" outbox retry -c "$WORK/c.yaml" "$BAD2" >/dev/null 2>"$WORK/retry2.err" || rc=$?
assert_eq "$rc" 1 "dedupctl outbox retry of a row that is not given up exits"
grep -q "row $BAD2 is not a given-up row" "$WORK/retry2.err" || fail "retry of a dropped row: $(cat "$WORK/retry2.err")"

# outbox.keep 1s: every sent row is purged, in purge.batch statements.
wait_until 30 "sent rows to be purged" eval '[[ $(sql "SELECT count(*) FROM dedupd.outbox") == 0 ]]'
assert_metric dedupd_outbox_purged_total 61
stop d1
grep -q "sent outbox row(s) in" "$WORK/d1.log" || fail "no purge line for sent outbox rows"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'DONE'")" 62 "keys applied"
assert_eq "$(kafka_lag "$T")" 0 "Kafka consumer lag"
log "ok: one unpublishable row costs nobody else anything"
