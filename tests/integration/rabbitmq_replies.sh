#!/usr/bin/env bash
# Replies through the outbox on RabbitMQ: each message naming a reply
# exchange (header reply-to) gets the first outcome, published with
# publisher confirms to that exchange, routing key its correlation-id; the
# duplicate's reply says so. Read back from a queue bound to the exchange.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rmq_lib.sh"

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
stop d1
rmq_dead_letters "$X.q" "$WORK/replies"
cat "$WORK/replies"
assert_eq "$(grep -c '^body OK: debited 10$' "$WORK/replies")" 2 "replies with the first outcome"
assert_eq "$(grep -c '^header correlation-id=c[12]$' "$WORK/replies")" 2 "each reply carries its correlation-id"
assert_eq "$(grep -c '^header dedupd.duplicate=true$' "$WORK/replies")" 1 "the duplicate's reply says so"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 9")" 990 "balance"
