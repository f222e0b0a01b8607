#!/usr/bin/env bash
# The seed's scenario on RabbitMQ: the same order-9527/PAY message published
# 100 times, by four publishers at once -> exactly one effect, balance 990,
# every delivery acknowledged (the queue is empty), none left unacked.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rmq_lib.sh"

Q="pay_same_$$"
rmq_queue "$Q"
rmq_write_config "$WORK/c.yaml" "$Q"

publishers=()
for p in 1 2 3 4; do
        (for i in $(seq 1 25); do
                echo '{"order_id":"9527","user_id":1,"amount":10}'
        done | rmq_publish "$Q") &
        publishers+=($!)
done
for pid in "${publishers[@]}"; do wait "$pid" || fail "a publisher failed"; done
assert_eq "$(rmq_messages "$Q")" 100 "messages in the queue"

start d1 "$WORK/c.yaml"
rmq_wait_empty "$Q"
stop d1

assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key = '9527/PAY'")" 1 "ledger rows for 9527/PAY"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 1")" 990 "balance of user 1"
assert_eq "$(sql "SELECT status || ' ' || response FROM dedupd.keys WHERE idem_key = '9527/PAY'")" "DONE OK: debited 10" "stored first outcome"
assert_eq "$(sql "SELECT sum(applied) || '/' || sum(duplicates) || '/' || max(next_offset) FROM dedupd.offsets WHERE topic = '$Q'")" "1/99/100" "applied/duplicates/deliveries counted"
assert_eq "$(rmq_messages "$Q")" 0 "messages left in the queue after shutdown"
grep -q "connected to amqp://127.0.0.1:.* vhost /: consuming 1 queue(s), prefetch 500" "$WORK/d1.log" || fail "no connection line in the log"
if grep -q "guest:guest\|$RABBITMQ_URL" "$WORK/d1.log"; then fail "the URL (with its password) is in the log"; fi
log "ok: the log names the broker, never the URL's password"

# The key from the AMQP message_id property instead of the payload: ten
# deliveries of three message ids (different payload text each time, so the
# body plays no part) -> three effects.
Q2="pay_mid_$$"
rmq_queue "$Q2"
rmq_write_config "$WORK/c2.yaml" "$Q2"
sed -i 's#subject: "{json:order_id}"#subject: "{amqp:message_id}"#' "$WORK/c2.yaml"
"$DEDUPCTL" check -c "$WORK/c2.yaml" >"$WORK/check2.out" 2>&1 || fail "dedupctl check refuses {amqp:message_id}: $(cat "$WORK/check2.out")"
for i in $(seq 1 10); do
        printf 'mid-%d\t{"user_id":2,"amount":10,"copy":%d}\n' $((i % 3)) "$i"
done | RABBITMQ_URL=$RABBITMQ_URL "$AT" publish "$Q2"
start d2 "$WORK/c2.yaml"
rmq_wait_empty "$Q2"
stop d2
assert_eq "$(sql "SELECT string_agg(idem_key, ',' ORDER BY idem_key) FROM dedupd.keys WHERE idem_key LIKE 'mid-%'")" "mid-0/PAY,mid-1/PAY,mid-2/PAY" "keys from {amqp:message_id}"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 2")" 970 "balance of user 2 (three effects)"

# prefetch bounds a batch: with prefetch 10 and batch.max_messages 200, no
# batch holds more than 10 deliveries (the broker sends no more unacked).
Q3="pay_prefetch_$$"
rmq_queue "$Q3"
PREFETCH=10 rmq_write_config "$WORK/c3.yaml" "$Q3"
for i in $(seq 1 100); do printf '{"order_id":"p-%d","user_id":3,"amount":1}\n' "$i"; done | rmq_publish "$Q3"
start d3 "$WORK/c3.yaml"
rmq_wait_empty "$Q3"
stop d3
assert_eq "$(sql "SELECT sum(consumed) FROM dedupd.progress_log WHERE topic = '$Q3'")" 100 "deliveries committed with prefetch 10"
assert_eq "$(sql "SELECT max(consumed) <= 10 FROM dedupd.progress_log WHERE topic = '$Q3'")" t "every batch within the prefetch"
log "batches with prefetch 10: $(sql "SELECT count(*) || ', largest ' || max(consumed) FROM dedupd.progress_log WHERE topic = '$Q3'")"
