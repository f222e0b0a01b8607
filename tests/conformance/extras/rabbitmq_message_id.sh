#!/usr/bin/env bash
# RabbitMQ only (a named extra of the conformance suite, whose same_order
# scenario covers the rest): the key from the AMQP message_id property, and
# rabbitmq.prefetch bounding a batch.
. "$(dirname "$0")/../../integration/lib.sh"
. "$(dirname "$0")/../../integration/rmq_lib.sh"

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
