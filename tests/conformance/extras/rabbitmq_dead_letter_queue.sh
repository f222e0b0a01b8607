#!/usr/bin/env bash
# RabbitMQ only (a named extra of the conformance suite, whose dead_letter
# scenario covers rabbitmq.dead_letter.exchange):
#  1. rabbitmq.dead_letter.exchange not set: basic.reject requeue=false, and
#     the queue's own x-dead-letter-exchange has it (RabbitMQ's x-death, no
#     dedupd reason), a startup warning says so;
#  2. a dead letter the exchange routes nowhere is never dropped: nothing is
#     acked until a queue is bound for it.
. "$(dirname "$0")/../../integration/lib.sh"
. "$(dirname "$0")/../../integration/rmq_lib.sh"

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

# ---- 1. the queue's own dead-letter exchange ---------------------------------
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
assert_eq "$(sql "SELECT sum(applied) || '/' || sum(duplicates) || '/' || sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$Q2'")" "2/1/3" "applied/duplicates/dead-lettered"
rmq_dead_letters "$Q2.rejected" "$WORK/rejected"
assert_eq "$(grep -c '^body ' "$WORK/rejected")" 3 "messages dead-lettered by the queue's own exchange"
assert_eq "$(grep -c '^header x-first-death-reason=rejected$' "$WORK/rejected")" 3 "RabbitMQ says they were rejected"
assert_eq "$(grep -c '^header dedupd.reason=' "$WORK/rejected" || true)" 0 "no dedupd reason headers on a queue's own dead letters"

# ---- 2. a dead letter the exchange routes nowhere is never dropped ----------
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
