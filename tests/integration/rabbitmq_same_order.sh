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
