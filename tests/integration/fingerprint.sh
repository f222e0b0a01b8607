#!/usr/bin/env bash
# Same key, different payload: counted and logged with both fingerprints, then
# absorbed (default) or dead-lettered with both fingerprints in headers; with
# fingerprint.fields only the chosen fields count.
. "$(dirname "$0")/lib.sh"

A="fp_absorb_$$" B="fp_dlq_$$" C="fp_fields_$$"
for t in "$A" "$B" "$C"; do topic "$t" 1; done
write_config "$WORK/c.yaml" "$A" "
  - name: $B
    key: {subject: \"{json:order_id}\", action: PAY}
    handler: {path: \"$BUILD/transfer.so\"}
    fingerprint: {on_mismatch: dead-letter}
  - name: $C
    key: {subject: \"{json:order_id}\", action: PAY}
    handler: {path: \"$BUILD/transfer.so\"}
    fingerprint: {fields: [user_id, amount], on_mismatch: dead-letter}"
# Keys live in the namespace, not the topic: A and B get different orders.
first='{"order_id":"Z","user_id":7,"amount":10}'
printf '%s\n' '{"order_id":"X","user_id":7,"amount":10}' | "$KT" produce -t "$A"
printf '%s\n' "$first" | "$KT" produce -t "$B"
printf '%s\n' '{"order_id":"Y","user_id":8,"amount":10,"note":"first"}' | "$KT" produce -t "$C"
start d1 "$WORK/c.yaml"
wait_done "$A"; wait_done "$B"; wait_done "$C"
# The same keys again: a different amount (a client bug), in a later batch ...
printf '%s\n' '{"order_id":"X","user_id":7,"amount":99}' | "$KT" produce -t "$A"
printf '%s\n' '{"order_id":"Z","user_id":7,"amount":99}' | "$KT" produce -t "$B"
# ... and for C, a change outside the fingerprinted fields, then one inside.
printf '%s\n' '{"order_id":"Y","user_id":8,"amount":10,"note":"retry"}' \
        '{"order_id":"Y","user_id":8,"amount":11,"note":"retry"}' | "$KT" produce -t "$C"
wait_done "$A"; wait_done "$B"; wait_done "$C"
stop d1

assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key IN ('X/PAY', 'Z/PAY')")" 2 "one effect each for X and Z"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 7")" 980 "balance: only the first amounts applied"
assert_eq "$(sql "SELECT mismatches || '/' || duplicates || '/' || dead_lettered FROM dedupd.offsets WHERE topic = '$A'")" "1/1/0" "absorb: mismatch counted, absorbed"
assert_eq "$(sql "SELECT mismatches || '/' || duplicates || '/' || dead_lettered FROM dedupd.offsets WHERE topic = '$B'")" "1/0/1" "dead-letter: mismatch counted, dead-lettered"
assert_eq "$(sql "SELECT mismatches || '/' || duplicates || '/' || dead_lettered FROM dedupd.offsets WHERE topic = '$C'")" "1/1/1" "fields: only the amount change is a mismatch"
grep -q "key X/PAY: fingerprint mismatch" "$WORK/d1.log" || fail "mismatch not logged"

"$KT" dump -t "$B.dlq" >"$WORK/dlq.txt"
stored=$(sed -n 's/^  dedupd.fingerprint.stored=//p' "$WORK/dlq.txt")
message=$(sed -n 's/^  dedupd.fingerprint.message=//p' "$WORK/dlq.txt")
want=$(printf '%s' "$first" | sha256sum | cut -d' ' -f1)
assert_eq "$stored" "$want" "stored fingerprint header = SHA-256 of the first payload"
[[ ${#message} == 64 && $message != "$stored" ]] || fail "message fingerprint header: '$message'"
grep -q 'dedupd.reason=fingerprint mismatch: same key, different payload' "$WORK/dlq.txt" || fail "no mismatch reason"
grep -q '"amount":99' "$WORK/dlq.txt" || fail "the mismatching message is not the one dead-lettered"
log "ok: dead letter carries both fingerprints"
assert_eq "$(sql "SELECT encode(fingerprint, 'hex') FROM dedupd.keys WHERE idem_key = 'Z/PAY'")" "$want" "stored fingerprint in dedupd.keys"

# verify and stats show the mismatches (how many, and which keys from where), read from dedupd.mismatches.
assert_eq "$(sql "SELECT string_agg(idem_key || '@' || \"offset\" || ':' || verdict, ',' ORDER BY idem_key) FROM dedupd.mismatches")" \
        "X/PAY@1:absorbed,Y/PAY@2:dead-lettered,Z/PAY@1:dead-lettered" "mismatches recorded with key, offset and verdict"
rc=0; "$DEDUPCTL" verify -c "$WORK/c.yaml" >"$WORK/verify.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "verify with mismatches (absorbed or dead-lettered, no anomaly) exits"
"$DEDUPCTL" stats -c "$WORK/c.yaml" >"$WORK/stats.out" 2>&1 || fail "stats: $(cat "$WORK/stats.out")"
for out in verify stats; do
        grep -Eq '^  total +3$' <(sed -n '/^fingerprint mismatches/,/^$/p' "$WORK/$out.out") || fail "$out shows no count of 3 mismatches: $(cat "$WORK/$out.out")"
        grep -q "key X/PAY from $A/0 offset 1 (absorbed at 20" "$WORK/$out.out" || fail "$out shows no example X/PAY: $(cat "$WORK/$out.out")"
        grep -q "key Z/PAY from $B/0 offset 1 (dead-lettered at 20" "$WORK/$out.out" || fail "$out shows no example Z/PAY"
done
log "ok: verify and stats show the 3 mismatches with their keys"
