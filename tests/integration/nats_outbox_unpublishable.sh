#!/usr/bin/env bash
# NATS JetStream: an outbox row that can never be published — a reply to a
# subject no stream captures — among good ones. Every good reply arrives
# exactly once and none waits behind it; no topic pauses; the bad row is
# given up with its reason after outbox.max_failures, counted, listed by
# dedupctl outbox list; dedupctl outbox retry publishes it once a stream
# captures its subject.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"
. "$(dirname "$0")/outbox_lib.sh"

R="replies.$ID" B="nocapture.$ID"
"$NT" stream "$STREAM" "$SUBJ" "$DLQ_SUBJ" "$R"
write_nats_config "$WORK/c.yaml" "$(outbox_settings)"
order() { printf '{"order_id":"n-%d","user_id":%d,"amount":10}\n' "$1" $(($1 % 50 + 1)); }
replies() { "$NT" dump "$STREAM" "$R" >"$WORK/replies.txt"; wc -l <"$WORK/replies.txt"; }
distinct_replies() { grep -oP '(^|[;\t])dedupd.key=[^;\t]*' "$WORK/replies.txt" | sort -u | wc -l; }

for i in $(seq 1 20); do order "$i"; done | publish "reply-to:$R" correlation-id:c
order 1000 | publish "reply-to:$B" correlation-id:c
for i in $(seq 21 40); do order "$i"; done | publish "reply-to:$R" correlation-id:c
start d1 "$WORK/c.yaml"
metrics_of d1
nats_done
wait_until 60 "the relay to settle every row, one given up" settled 1
BAD=$(row_to "$B")
assert_given_up "$BAD" "$B.*no stream captures this subject"
assert_eq "$(replies)" 40 "replies on $R"
assert_eq "$(distinct_replies)" 40 "distinct replies (each good reply exactly once)"
assert_metric dedupd_outbox_given_up 1
assert_metric dedupd_outbox_given_up_total 1
assert_metric dedupd_outbox_publish_failures_total 3
assert_metric dedupd_outbox_backlog 0

# Good ones after it go as usual.
for i in $(seq 41 60); do order "$i"; done | publish "reply-to:$R" correlation-id:c
nats_done
wait_until 60 "the relay to settle the new rows" settled 1
assert_eq "$(replies)" 60 "replies on $R"
assert_eq "$(distinct_replies)" 60 "distinct replies"
assert_no_pause d1

# A stream now captures the subject: retried, the row is published once.
"$NT" stream "S2_$ID" "$B"
retry_until_sent "$BAD"
assert_eq "$("$NT" dump "S2_$ID" "$B" | wc -l)" 1 "messages on $B"
stop d1
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'DONE'")" 61 "keys applied"
log "ok: one unpublishable row costs nobody else anything"
