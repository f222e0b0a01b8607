#!/usr/bin/env bash
# Two different orders never merge into one key. A JSON number is read by the
# parser as a double, so 9007199254740993.0 and 9007199254740992.0 (and 0.1 and
# 0.100000000000000005) used to become one key and the second payment was
# absorbed as a duplicate. Now a key is built only from exact values: integers
# as integers, strings as their bytes; a number with a fraction or an exponent
# is dead-lettered with the reason. The merges that remain are intended and
# exact: the integer 424242 and the string "424242" are the same order.
. "$(dirname "$0")/lib.sh"

T="exact_keys_$$"
topic "$T" 1
write_config "$WORK/c.yaml" "$T"
cat <<'JSON' | "$KT" produce -t "$T"
{"order_id":9007199254740993,"user_id":1,"amount":10}
{"order_id":9007199254740992,"user_id":2,"amount":10}
{"order_id":9007199254740993.0,"user_id":3,"amount":10}
{"order_id":9007199254740992.0,"user_id":4,"amount":10}
{"order_id":0.1,"user_id":5,"amount":10}
{"order_id":0.100000000000000005,"user_id":6,"amount":10}
{"order_id":424242,"user_id":7,"amount":10}
{"order_id":"424242","user_id":7,"amount":10}
{"order_id":18446744073709551617,"user_id":8,"amount":10}
JSON
start d "$WORK/c.yaml"
wait_done "$T" 60
stop d

assert_eq "$(sql "SELECT string_agg(idem_key, ',' ORDER BY idem_key) FROM transfer_ledger")" \
        "424242/PAY,9007199254740992/PAY,9007199254740993/PAY" "orders applied, each with its exact key"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE user_id IN (1, 2)")" 2 "payments of the two large integer ids, both applied"
assert_eq "$(sql "SELECT duplicates FROM dedupd.offsets WHERE topic = '$T'")" 1 "duplicates absorbed (\"424242\" after 424242)"
"$KT" dump -t "$T.dlq" >"$WORK/dlq.txt"
assert_eq "$(grep -c "dedupd.reason=key: json field 'order_id' is a number with a fraction or an exponent" "$WORK/dlq.txt")" 4 \
        "non-exact numbers dead-lettered, none merged"
assert_eq "$(grep -c "dedupd.reason=key: payload has an integer beyond 64 bits" "$WORK/dlq.txt")" 1 "an integer beyond 64 bits dead-lettered"
for v in 9007199254740993.0 9007199254740992.0 0.1 0.100000000000000005; do
        grep -q "\"order_id\":$v," "$WORK/dlq.txt" || fail "the payment with order_id $v is not in the dead-letter topic"
done
log "ok: every non-exact order id is in the dead-letter topic, with its payload"
assert_eq "$(kafka_lag "$T")" 0 "Kafka lag"
