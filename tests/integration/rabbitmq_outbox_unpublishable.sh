#!/usr/bin/env bash
# RabbitMQ: outbox rows that can never be published among good ones — a
# reply to an exchange that does not exist, and a row whose key (its routing
# key) is over AMQP's 255 bytes: a reply with such a correlation-id is refused
# before it is written (counted; its message applied), so that row is one an
# older dedupd wrote, put in by hand. Every good reply arrives exactly once
# and none waits behind them; no queue pauses; each bad row is given up with
# its reason after outbox.max_failures, counted, listed by dedupctl outbox
# list; dedupctl outbox retry publishes the first once its exchange exists,
# and tries the other again from a count of 0.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rmq_lib.sh"
. "$(dirname "$0")/outbox_lib.sh"

Q="pay_unpub_$$" X="replies_unpub_$$" B="no_such_exchange_$$"
queue() { echo "{\"name\":\"$1\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}}"; }
fanout() { echo "{\"name\":\"$1\",\"vhost\":\"/\",\"type\":\"fanout\",\"durable\":true,\"auto_delete\":false,\"internal\":false,\"arguments\":{}}"; }
bind() { echo "{\"source\":\"$1\",\"vhost\":\"/\",\"destination\":\"$2\",\"destination_type\":\"queue\",\"routing_key\":\"\",\"arguments\":{}}"; }
rmq_define "{\"queues\":[$(queue "$Q"),$(queue "$X.q")],\"exchanges\":[$(fanout "$X")],\"bindings\":[$(bind "$X" "$X.q")]}"
rmq_write_config "$WORK/c.yaml" "$Q" "$(outbox_settings)"
order() { printf '{"order_id":"q-%d","user_id":%d,"amount":10}\n' "$1" $(($1 % 50 + 1)); }
replies() { rmq_messages "$X.q"; }
LONG=$(printf 'k%.0s' $(seq 1 300))

for i in $(seq 1 20); do order "$i"; done | rmq_publish "$Q" -H "reply-to: $X" -H "correlation-id: c"
order 1000 | rmq_publish "$Q" -H "reply-to: $B" -H "correlation-id: c"
order 2000 | rmq_publish "$Q" -H "reply-to: $X" -H "correlation-id: $LONG"
for i in $(seq 21 40); do order "$i"; done | rmq_publish "$Q" -H "reply-to: $X" -H "correlation-id: c"
# A row no RabbitMQ takes, as an older dedupd could have written it.
"$DEDUPCTL" migrate -c "$WORK/c.yaml" >/dev/null
sql "INSERT INTO dedupd.outbox (namespace, idem_key, topic, key, value)
     VALUES ('it-$ID', 'legacy/PAY', '$X', convert_to('$LONG', 'UTF8'), convert_to('old', 'UTF8'))"
start d1 "$WORK/c.yaml"
metrics_of d1
rmq_wait_empty "$Q"
wait_until 60 "the relay to settle every row, two given up" settled 2
BAD=$(row_to "$B")
LONGROW=$(sql "SELECT id FROM dedupd.outbox WHERE idem_key = 'legacy/PAY'")
assert_eq "$(sql "SELECT count(*) FROM dedupd.outbox WHERE idem_key = 'q-2000/PAY'")" 0 "rows for the reply whose correlation-id no routing key can hold"
assert_eq "$(curl -s "http://$ADDR/metrics" | awk '$1 ~ /^dedupd_replies_refused_total\{.*reason="invalid"/ {print $2}')" 1 "that reply refused as invalid"
assert_given_up "$BAD" "exchange '$B' does not exist \\(404 NOT_FOUND\\)"
assert_given_up "$LONGROW" "routing key .* at most 255 bytes, not 300"
assert_eq "$(replies)" 40 "replies in $X.q"
assert_metric dedupd_outbox_given_up 2
assert_metric dedupd_outbox_given_up_total 2
assert_metric dedupd_outbox_publish_failures_total 6
assert_metric dedupd_outbox_backlog 0

# Good ones after them go as usual.
for i in $(seq 41 60); do order "$i"; done | rmq_publish "$Q" -H "reply-to: $X" -H "correlation-id: c"
rmq_wait_empty "$Q"
wait_until 60 "the relay to settle the new rows" settled 2
assert_eq "$(replies)" 60 "replies in $X.q"
rmq_dead_letters "$X.q" "$WORK/replies"
assert_eq "$(grep -c '^header dedupd.key=' "$WORK/replies")" 60 "replies read back"
assert_eq "$(grep '^header dedupd.key=' "$WORK/replies" | sort -u | wc -l)" 60 "distinct replies (each good reply exactly once)"
assert_no_pause d1

# The exchange now exists: retried, the row is published once.
rmq_define "{\"queues\":[$(queue "$B.q")],\"exchanges\":[$(fanout "$B")],\"bindings\":[$(bind "$B" "$B.q")]}"
retry_until_sent "$BAD"
assert_eq "$(rmq_messages "$B.q")" 1 "messages in $B.q"
# The long key cannot go anywhere: retried, it fails again from a count of 0.
"$DEDUPCTL" outbox retry -c "$WORK/c.yaml" "$LONGROW" >/dev/null || fail "dedupctl outbox retry exited $?"
wait_until 30 "row $LONGROW given up again" metric_is dedupd_outbox_given_up_total 3
assert_given_up "$LONGROW" "not 300"
"$DEDUPCTL" outbox drop -c "$WORK/c.yaml" --all >"$WORK/drop.out" || fail "dedupctl outbox drop exited $?"
grep -q "^row $LONGROW: dropped" "$WORK/drop.out" || fail "dedupctl outbox drop: $(cat "$WORK/drop.out")"
stop d1
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'DONE'")" 62 "keys applied"
assert_eq "$(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL")" 0 "rows not sent"
log "ok: unpublishable rows cost nobody else anything"
