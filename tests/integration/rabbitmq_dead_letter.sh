#!/usr/bin/env bash
# Unkeyable messages on RabbitMQ, both ways:
#  1. rabbitmq.dead_letter.exchange set: each is published unchanged (body,
#     its own headers) plus dedupd's reason headers, confirmed, routed by the
#     topic's dead_letter.topic; the original is acked; read back, checked.
#  2. not set: basic.reject requeue=false, and the queue's own
#     x-dead-letter-exchange has it (RabbitMQ's x-death, no dedupd reason).
# The keyable messages around them take effect once; nothing is left unacked
# (also when the batch's last delivery is the one dead-lettered).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rmq_lib.sh"

publish_mix() {
        {
                echo '{"order_id":"a1","user_id":1,"amount":10}'
                echo 'not json at all'
                echo '{"order_id":"a2","user_id":2,"amount":10}'
                echo '{"user_id":3,"amount":10}'
                echo '{"order_id":"a1","user_id":1,"amount":10}'
                echo 'the last delivery, not json either'
        } | rmq_publish "$1" -H "trace: t-77"
}

# ---- 1. dedupd's own dead-letter exchange, with reasons -----------------------
Q="dl_$$"
rmq_define "{\"queues\":[{\"name\":\"$Q\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}},
  {\"name\":\"$Q.letters\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}}],
 \"exchanges\":[{\"name\":\"dlx_$$\",\"vhost\":\"/\",\"type\":\"direct\",\"durable\":true,\"auto_delete\":false,\"internal\":false,\"arguments\":{}}],
 \"bindings\":[{\"source\":\"dlx_$$\",\"vhost\":\"/\",\"destination\":\"$Q.letters\",\"destination_type\":\"queue\",\"routing_key\":\"$Q.dlq\",\"arguments\":{}}]}"
rmq_write_config "$WORK/c1.yaml" "$Q" "" "  dead_letter:
    exchange: dlx_$$"
publish_mix "$Q"
start d1 "$WORK/c1.yaml"
rmq_wait_empty "$Q"
stop d1

assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 2 "effects (a1 and a2, a1 once)"
assert_eq "$(sql "SELECT sum(applied) || '/' || sum(duplicates) || '/' || sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$Q'")" "2/1/3" "applied/duplicates/dead-lettered"
assert_eq "$(rmq_messages "$Q.letters")" 3 "dead letters in $Q.letters"
rmq_dead_letters "$Q.letters" "$WORK/letters"
cat "$WORK/letters"
assert_eq "$(grep -c '^body not json at all$' "$WORK/letters")" 1 "the non-JSON message, body unchanged"
assert_eq "$(grep -c '^body {"user_id":3,"amount":10}$' "$WORK/letters")" 1 "the message without order_id, body unchanged"
assert_eq "$(grep -c '^header trace=t-77$' "$WORK/letters")" 3 "their own headers kept"
assert_eq "$(grep -c "^header dedupd.origin.topic=$Q\$" "$WORK/letters")" 3 "dedupd.origin.topic names the queue"
assert_eq "$(grep -c '^header dedupd.namespace=it-' "$WORK/letters")" 3 "dedupd.namespace"
grep -q '^header dedupd.reason=key: payload is not valid JSON' "$WORK/letters" || fail "no reason for the non-JSON message"
grep -q "^header dedupd.reason=key: json field 'order_id' is missing" "$WORK/letters" || fail "no reason for the message without order_id"
log "ok: each dead letter says why"

# ---- 2. the queue's own dead-letter exchange ---------------------------------
Q2="dlq_own_$$"
rmq_define "{\"queues\":[{\"name\":\"$Q2\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{\"x-dead-letter-exchange\":\"own_dlx_$$\"}},
  {\"name\":\"$Q2.rejected\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}}],
 \"exchanges\":[{\"name\":\"own_dlx_$$\",\"vhost\":\"/\",\"type\":\"fanout\",\"durable\":true,\"auto_delete\":false,\"internal\":false,\"arguments\":{}}],
 \"bindings\":[{\"source\":\"own_dlx_$$\",\"vhost\":\"/\",\"destination\":\"$Q2.rejected\",\"destination_type\":\"queue\",\"routing_key\":\"\",\"arguments\":{}}]}"
rmq_write_config "$WORK/c2.yaml" "$Q2"
publish_mix "$Q2"
start d2 "$WORK/c2.yaml"
rmq_wait_empty "$Q2"
stop d2
grep -q "rabbitmq.dead_letter.exchange is not set" "$WORK/d2.log" || fail "no startup warning about rejected dead letters"
assert_eq "$(sql "SELECT sum(applied) || '/' || sum(duplicates) || '/' || sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$Q2'")" "0/3/3" "second queue: applied/duplicates/dead-lettered (same keys as the first)"
rmq_dead_letters "$Q2.rejected" "$WORK/rejected"
assert_eq "$(grep -c '^body ' "$WORK/rejected")" 3 "messages dead-lettered by the queue's own exchange"
assert_eq "$(grep -c '^header x-first-death-reason=rejected$' "$WORK/rejected")" 3 "RabbitMQ says they were rejected"
assert_eq "$(grep -c '^header dedupd.reason=' "$WORK/rejected" || true)" 0 "no dedupd reason headers on a queue's own dead letters"

# ---- 3. a dead letter the exchange routes nowhere is never dropped ----------
# The exchange exists but no queue is bound for the routing key: the publish
# comes back unroutable (mandatory), the batch is retried, nothing is acked;
# once a queue is bound, the dead letter lands there and the queue drains.
Q3="dl_unrouted_$$"
rmq_define "{\"queues\":[{\"name\":\"$Q3\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}}],
 \"exchanges\":[{\"name\":\"dlx3_$$\",\"vhost\":\"/\",\"type\":\"direct\",\"durable\":true,\"auto_delete\":false,\"internal\":false,\"arguments\":{}}]}"
rmq_write_config "$WORK/c3.yaml" "$Q3" "" "  dead_letter:
    exchange: dlx3_$$"
{ echo '{"order_id":"u1","user_id":4,"amount":10}'; echo 'no key in here'; } | rmq_publish "$Q3"
start d3 "$WORK/c3.yaml"
for ((i = 0; i < 100; i++)); do grep -q "routed a message with routing key '$Q3.dlq' to no queue" "$WORK/d3.log" && break; sleep 0.1; done
grep -q "routed a message with routing key '$Q3.dlq' to no queue" "$WORK/d3.log" || fail "no error about the unroutable dead letter"
sleep 1
assert_eq "$(rmq_messages "$Q3")" 2 "messages still in $Q3 (none acked while the dead letter has nowhere to go)"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key = 'u1/PAY'")" 0 "effects of the batch in backoff"
rmq_define "{\"queues\":[{\"name\":\"$Q3.letters\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}}],
 \"bindings\":[{\"source\":\"dlx3_$$\",\"vhost\":\"/\",\"destination\":\"$Q3.letters\",\"destination_type\":\"queue\",\"routing_key\":\"$Q3.dlq\",\"arguments\":{}}]}"
rmq_wait_empty "$Q3" 60
stop d3
assert_eq "$(rmq_messages "$Q3.letters")" 1 "the dead letter, once it has a queue"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key = 'u1/PAY'")" 1 "effects once the batch went through"
