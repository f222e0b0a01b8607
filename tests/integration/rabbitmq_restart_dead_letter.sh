#!/usr/bin/env bash
# RabbitMQ: the broker goes away (SIGTERM) while dedupd dead-letters: a tenth of the queue is unkeyable (not JSON, or no
# order_id), rabbitmq.dead_letter.exchange is set, and dedupd stops itself
# right after it received a batch (fault point after_poll, SIGSTOP), so the
# broker stops under the batch about to publish its dead letters and await
# their confirms, however fast the machine. dedupd stays alive, reconnects and
# finishes: every good order applied once, every poison message in the
# dead-letter queue (once, or again when its batch was retried) with its
# reason, the queue empty at the end (nothing unacknowledged). Not SIGKILL:
# the broker then loses what it had not yet written of the test's own
# publishes (made without confirms) and definitions, which is no dedupd
# failure; dedupd's dead letters are written only once confirmed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rmq_lib.sh"
. "$(dirname "$0")/poison_lib.sh"
require_fault_points

Q="pay_rdl_$$" DLX="dlx_rdl_$$"
MSGS=4000 ORDERS=3000
export SEED_ACCOUNTS=50 INITIAL_BALANCE=100000 BATCH_MAX=50 PREFETCH=100
# (defined again after the restart: a binding made just before the broker
# stops may not be on disk yet, and it would route the dead letters nowhere)
define() {
        rmq_define "{\"queues\":[{\"name\":\"$Q\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}},
         {\"name\":\"$Q.letters\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}}],
         \"exchanges\":[{\"name\":\"$DLX\",\"vhost\":\"/\",\"type\":\"direct\",\"durable\":true,\"auto_delete\":false,\"internal\":false,\"arguments\":{}}],
         \"bindings\":[{\"source\":\"$DLX\",\"vhost\":\"/\",\"destination\":\"$Q.letters\",\"destination_type\":\"queue\",\"routing_key\":\"$Q.dlq\",\"arguments\":{}}]}"
}
define
rmq_write_config "$WORK/c.yaml" "$Q" "" "  dead_letter:
    exchange: $DLX"
workload "$WORK/w.txt" "$WORK/keys.txt" "$MSGS" "$ORDERS"
with_poison "$WORK/w.txt" "$WORK/all.txt" "$WORK/poison.txt" 10

# done_alive NAME WHEN: until the queue is empty, failing at once (with ASan's words) when dedupd NAME dies meanwhile
done_alive() {
        poll 240 empty_or_gone "$1" || fail "timed out: queue $Q still holds $HELD message(s)"
        alive "$1" "$2"
}
empty_or_gone() { ! kill -0 "${PIDS[$1]}" 2>/dev/null || rmq_empty "$Q"; }

rmq_publish "$Q" <"$WORK/all.txt"
DEDUPD_FAULT="after_poll:5:stop" start d1 "$WORK/c.yaml"
wait_self_stopped d1 "at its 5th batch"
"$DEDUPD_SERVICES" rabbitmq-stop term
log "broker stopped with $(keys) keys recorded, dedupd about to dead-letter"
kill -CONT "${PIDS[d1]}"
sleep 4 # its confirms, its acks and its reconnections fail
alive d1 "while the broker was down"
"$DEDUPD_SERVICES" rabbitmq-start
define
done_alive d1 "after the broker came back"
stop d1
grep -q "\[rabbitmq\] connection to amqp://127.0.0.1:.* lost: " "$WORK/d1.log" || fail "no 'connection lost' line"
grep -q "\[rabbitmq\] reconnected to amqp://127.0.0.1:" "$WORK/d1.log" || fail "no 'reconnected' line"
grep -q "batch of [0-9]* not finished: publishing to amqp://" "$WORK/d1.log" || fail "no dead-letter publish failed while the broker was away"

check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" "$ORDERS" "distinct keys recorded"
rmq_dead_letters "$Q.letters" "$WORK/letters"
sed -n 's/^body //p' "$WORK/letters" >"$WORK/bodies.txt"
dead_letters_cover "$WORK/poison.txt" "$WORK/bodies.txt"
assert_eq "$(grep -c '^header dedupd.reason=key: ' "$WORK/letters")" "$(wc -l <"$WORK/bodies.txt")" "dead letters with a dedupd.reason"
counted=$(sql "SELECT sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$Q'")
((counted >= $(wc -l <"$WORK/poison.txt"))) || fail "only $counted dead letters counted for $(wc -l <"$WORK/poison.txt") poison messages"
log "ok: $counted dead letters counted"
