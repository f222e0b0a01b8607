#!/usr/bin/env bash
# Dead letters: messages whose key cannot be derived (not JSON, the field
# missing, empty or not a scalar, an empty payload, one over
# max_payload_bytes, invalid UTF-8, the batch's last delivery) go to the
# broker's dead-letter destination unchanged, with their own headers, the
# reason and their origin, acknowledged by the broker before the original is;
# the good messages around them apply once; nothing is left unacknowledged.
. "$(dirname "$0")/../lib.sh"

b_setup pay_dlq 1
b_config "$WORK/c.yaml" "    max_payload_bytes: 300"
big=$(printf '%0400d' 0)
{
        echo '{"order_id":"good-1","user_id":4,"amount":10}'
        echo 'this is not json'
        echo '{"user_id":4,"amount":10}'
        echo '{"order_id":"","user_id":4,"amount":10}'
        echo '{"order_id":{"nested":1},"user_id":4,"amount":10}'
        echo ''
        echo "{\"order_id\":\"big\",\"pad\":\"$big\"}"
        printf '{"order_id":"bad-\xff\xfe","user_id":4,"amount":10}\n'
        echo '{"order_id":"good-2","user_id":4,"amount":10}'
        echo '{"order_id":"good-1","user_id":4,"amount":10}'
        echo 'the last delivery, not json either'
} | b_produce "trace:t-42"
assert_eq "$(b_count)" 11 "messages produced"

start d1 "$WORK/c.yaml"
b_wait_done
stop d1

assert_eq "$(sql "SELECT string_agg(idem_key, ',' ORDER BY idem_key) FROM dedupd.keys")" "good-1/PAY,good-2/PAY" "keys applied"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 4")" 980 "balance of user 4"
assert_eq "$(sql "SELECT sum(applied) || '/' || sum(duplicates) || '/' || sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$NAME_B'")" "2/1/8" "applied/duplicates/dead-lettered"
b_check_acked

b_dead_letters "$WORK/dlq.txt"
cut -c1-300 "$WORK/dlq.txt"
assert_eq "$(wc -l <"$WORK/dlq.txt")" 8 "dead letters"
# each dead letter: the message's place, its body unchanged, its reason
while IFS='|' read -r n body reason; do
        [[ $reason != EMPTY ]] || reason=$B_EMPTY_REASON
        line=$(dead_letter_of "$WORK/dlq.txt" "$(b_origin "$n")" "$reason") ||
                fail "no dead letter of message $n with its origin and reason '$reason'"
        [[ $body == - ]] || [[ $line == "$body" ]] || fail "message $n's dead letter: body '$line', not '$body'"
done <<'CASES'
2|this is not json|payload is not valid JSON
3|{"user_id":4,"amount":10}|json field 'order_id' is missing
4|{"order_id":"","user_id":4,"amount":10}|json field 'order_id' is empty
5|{"order_id":{"nested":1},"user_id":4,"amount":10}|not a scalar
6||EMPTY
7|-|payload too large
8|-|payload is not valid JSON
11|the last delivery, not json either|payload is not valid JSON
CASES
log "ok: every dead letter carries its body, its reason and its origin"
assert_eq "$(grep -caE '(^|;)trace=t-42(;|'$'\t'')' "$WORK/dlq.txt")" 8 "dead letters keeping the message's own headers"
assert_eq "$(grep -caE "(^|;)dedupd\.origin\.(topic|subject)=$NAME_B[;$TAB]" "$WORK/dlq.txt")" 8 "dead letters naming the topic they came from"
assert_eq "$(grep -caE "(^|;)dedupd\.namespace=it-$ID[;$TAB]" "$WORK/dlq.txt")" 8 "dead letters naming dedupd's namespace"
