#!/usr/bin/env bash
# Messages whose key cannot be derived go to the dead-letter topic with the
# reason and their origin; the good ones around them are processed; no stall.
. "$(dirname "$0")/lib.sh"

T="pay_dlq_$$"
topic "$T" 1
write_config "$WORK/c.yaml" "$T" "    max_payload_bytes: 300"
big=$(printf '%0400d' 0)
{
        echo '{"order_id":"good-1","user_id":4,"amount":10}'
        echo 'this is not json'
        echo '{"user_id":4,"amount":10}'
        echo '{"order_id":"","user_id":4,"amount":10}'
        echo '{"order_id":{"nested":1},"user_id":4,"amount":10}'
        echo '\N'
        echo "{\"order_id\":\"big\",\"pad\":\"$big\"}"
        printf '{"order_id":"bad-\xff\xfe","user_id":4,"amount":10}\n'
        echo '{"order_id":"good-2","user_id":4,"amount":10}'
} | "$KT" produce -t "$T"

start d1 "$WORK/c.yaml"
wait_done "$T"
stop d1

assert_eq "$(sql "SELECT string_agg(idem_key, ',' ORDER BY idem_key) FROM dedupd.keys")" "good-1/PAY,good-2/PAY" "keys applied"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 4")" 980 "balance of user 4"
"$KT" dump -t "$T.dlq" >"$WORK/dlq.txt"
assert_eq "$(grep -c '^  dedupd.reason=' "$WORK/dlq.txt")" 7 "dead-lettered messages"
for reason in "payload is not valid JSON" "json field 'order_id' is missing" "json field 'order_id' is empty" \
        "not a scalar" "payload is empty" "payload too large" "payload is not valid JSON"; do
        grep -q "dedupd.reason=.*$reason" "$WORK/dlq.txt" || fail "no dead letter with reason '$reason'"
done
grep -q "^  dedupd.origin.topic=$T$" "$WORK/dlq.txt" || fail "dead letters do not name their origin topic"
grep -q "^  dedupd.origin.offset=1$" "$WORK/dlq.txt" || fail "dead letters do not name their origin offset"
log "ok: every dead letter carries its reason and origin"
assert_eq "$(sql "SELECT dead_lettered FROM dedupd.offsets WHERE topic = '$T'")" 7 "dead letters counted"
assert_eq "$(kafka_lag "$T")" 0 "Kafka consumer lag"
