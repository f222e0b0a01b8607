#!/usr/bin/env bash
# RabbitMQ only (a named extra of the conformance suite, whose replies
# scenario covers the first outcome, the duplicate's mark and the ids):
# replies to a direct exchange, routed by their correlation-id, and a
# failover to a replica that lost the commit — RabbitMQ cannot rewind, so
# the caller asks again: the request applies again and its reply goes out
# with the same AMQP message_id, its dedupd.outbox.id derived from its key.
. "$(dirname "$0")/../../integration/lib.sh"
. "$(dirname "$0")/../../integration/rmq_lib.sh"
. "$(dirname "$0")/../../integration/outbox_lib.sh"

Q="pay_reply_$$" X="replies_$$"
rmq_define "{\"queues\":[{\"name\":\"$Q\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}},
  {\"name\":\"$X.q\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}}],
 \"exchanges\":[{\"name\":\"$X\",\"vhost\":\"/\",\"type\":\"direct\",\"durable\":true,\"auto_delete\":false,\"internal\":false,\"arguments\":{}}],
 \"bindings\":[{\"source\":\"$X\",\"vhost\":\"/\",\"destination\":\"$X.q\",\"destination_type\":\"queue\",\"routing_key\":\"c1\",\"arguments\":{}},
  {\"source\":\"$X\",\"vhost\":\"/\",\"destination\":\"$X.q\",\"destination_type\":\"queue\",\"routing_key\":\"c2\",\"arguments\":{}}]}"
rmq_write_config "$WORK/c.yaml" "$Q"
echo '{"order_id":"R1","user_id":9,"amount":10}' | rmq_publish "$Q" -H "reply-to: $X" -H "correlation-id: c1"
echo '{"order_id":"R1","user_id":9,"amount":10}' | rmq_publish "$Q" -H "reply-to: $X" -H "correlation-id: c2"
start d1 "$WORK/c.yaml"
rmq_wait_empty "$Q"
for ((i = 0; i < 100; i++)); do [[ $(rmq_messages "$X.q") == 2 ]] && break; sleep 0.1; done
# A failover to a replica that lost the commit (RabbitMQ cannot rewind: the
# caller asks again): R1 applies again, and its reply has the same id.
lose_commits "it-$ID" "UPDATE account SET balance = 1000 WHERE user_id = 9; DELETE FROM transfer_ledger"
echo '{"order_id":"R1","user_id":9,"amount":10}' | rmq_publish "$Q" -H "reply-to: $X" -H "correlation-id: c1"
rmq_wait_empty "$Q"
for ((i = 0; i < 100; i++)); do [[ $(rmq_messages "$X.q") == 3 ]] && break; sleep 0.1; done
stop d1
rmq_dead_letters "$X.q" "$WORK/replies"
cat "$WORK/replies"
assert_eq "$(grep -c '^body OK: debited 10$' "$WORK/replies")" 3 "replies with the first outcome"
assert_eq "$(grep -c '^header correlation-id=c[12]$' "$WORK/replies")" 3 "each reply carries its correlation-id"
assert_eq "$(grep -c '^header dedupd.duplicate=true$' "$WORK/replies")" 1 "the duplicate's reply says so"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 9")" 990 "balance"
# "message_id ID|dedupd.outbox.id|correlation-id|duplicate" per reply, in queue order
awk '/^message_id /{m = $2} /^header dedupd.outbox.id=/{o = substr($2, 18)} /^header correlation-id=/{c = substr($2, 16)}
     /^header dedupd.duplicate=/{d = substr($2, 18)} /^body /{print m "|" o "|" c "|" d; m = o = c = d = "-"}' \
        "$WORK/replies" >"$WORK/ids"
cat "$WORK/ids"
first=$(derived_id "it-$ID" R1/PAY reply)
assert_eq "$(awk -F'|' '$1 != $2' "$WORK/ids" | wc -l)" 0 "replies whose message_id is not their dedupd.outbox.id"
assert_eq "$(grep -c "^$first|$first|c1|false$" "$WORK/ids")" 2 "R1's reply, before and after the failover, with the id derived from its key"
assert_eq "$(grep -c '|c2|true$' "$WORK/ids")" 1 "the duplicate's reply, with an id of its own"
assert_eq "$(sort -u "$WORK/ids" | wc -l)" 2 "distinct reply ids"
