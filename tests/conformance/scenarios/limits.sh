#!/usr/bin/env bash
# Limits: each message limit of the limits: section exceeded once
# (payload_bytes, key_bytes, json_depth, headers): the message is
# dead-lettered with the limit in dedupd.reason while its neighbours are
# applied; nothing is lost; a long key within key_bytes is stored hashed and
# keeps its text, which dedupctl inspect finds by the text and by the hash.
. "$(dirname "$0")/../lib.sh"

pad() { head -c "$1" /dev/zero | tr '\0' p; }
order() { printf '{"order_id":"%s","user_id":%d,"amount":%d%s}\n' "$1" "$2" "$3" "${4:-}"; }

b_setup pay_limits 1
b_config "$WORK/a.yaml" "limits:
  payload_bytes: 2000
  key_bytes: 700
  json_depth: 8
  headers: 5"
big=$(order big 4 10 ",\"pad\":\"$(pad 3000)\"")
long=$(printf 'L%.0s' $(seq 1 600))   # a 604-byte key: hashed, within key_bytes
toolong=$(printf 'X%.0s' $(seq 1 800)) # an 804-byte key: past key_bytes
{
        order good-1 4 10
        echo "$big"
        order good-2 4 10
        order "$toolong" 4 10
        order "$long" 4 10
        order deep 4 10 ',"x":[[[[[[[[[[1]]]]]]]]]]'
} | b_produce
order good-3 4 10 | b_produce h1:a h2:b h3:c
order many-headers 4 10 | b_produce h1:a h2:b h3:c h4:d h5:e h6:f
order good-4 4 10 | b_produce
assert_eq "$(b_count)" 9 "messages produced"

start d1 "$WORK/a.yaml"
b_wait_done
stop d1

assert_eq "$(sql "SELECT string_agg(CASE WHEN idem_key LIKE 'sha256:%' THEN 'sha256' ELSE idem_key END, ',' ORDER BY idem_key) FROM dedupd.keys")" \
        "good-1/PAY,good-2/PAY,good-3/PAY,good-4/PAY,sha256" "keys applied (the neighbours of every dead letter)"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 4")" 950 "balance of user 4 (five payments of 10)"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 5 "ledger rows"
b_dead_letters "$WORK/dlq.txt"
assert_eq "$(wc -l <"$WORK/dlq.txt")" 4 "dead letters"
for reason in \
        "payload too large: $((${#big} + B_BODY_EXTRA)) bytes exceeds limits.payload_bytes (2000)" \
        "key: key of 804 bytes exceeds limits.key_bytes (700)" \
        "payload is JSON nested more than 8 levels deep: exceeds limits.json_depth (8)" \
        "6 headers exceed limits.headers (5)"; do
        dead_letter_of "$WORK/dlq.txt" . "$reason" >/dev/null || fail "no dead letter with reason '$reason': $(grep -o 'dedupd.reason=[^;]*' "$WORK/dlq.txt")"
        log "ok: dead-lettered: $reason"
done
assert_eq "$(sql "SELECT consumed, applied, dead_lettered FROM dedupd.offsets WHERE topic = '$NAME_B'")" "9|5|4" \
        "consumed, applied, dead-lettered: nothing lost"
b_check_acked

# The hashed key keeps its text; inspect finds it by the text and by the hash.
assert_eq "$(sql "SELECT key_text = '$long/PAY' FROM dedupd.keys WHERE idem_key LIKE 'sha256:%'")" t "key_text of the hashed key"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE key_text IS NOT NULL")" 1 "keys with a text beside them"
hash=$(sql "SELECT idem_key FROM dedupd.keys WHERE idem_key LIKE 'sha256:%'")
"$DEDUPCTL" inspect -c "$WORK/a.yaml" "$long/PAY" >"$WORK/inspect.txt" || fail "inspect by text: exit $?"
grep -q "^idem_key  *$hash$" "$WORK/inspect.txt" || fail "inspect by text: $(cat "$WORK/inspect.txt")"
grep -q "^key_text  *$long/PAY$" "$WORK/inspect.txt" || fail "inspect shows no key_text"
"$DEDUPCTL" inspect -c "$WORK/a.yaml" "$hash" | grep "^key_text  *$long/PAY$" >/dev/null || fail "inspect by hash shows no key_text"
log "ok: dedupctl inspect finds the hashed key by its text and by its hash, and shows the text"
