#!/usr/bin/env bash
# Case 9: bad input in the middle of a workload with duplicates: an empty value,
# a tombstone (null value), invalid UTF-8 in the key field, JSON nested 3000
# levels deep (with and without the key field at the top), a payload over
# max_payload_bytes, and a key source longer than 512 bytes (a valid message:
# its key is stored hashed as "sha256:<64 hex>"), sent twice in different
# batches. Every bad one must be in the dead-letter topic with a dedupd.reason
# header, the long key must have exactly one record and at most one effect, and
# the run must not stall.
# shellcheck source=tests/faults/faultlib.sh
. "$(dirname "$0")/../faultlib.sh"

export SEED_ACCOUNTS=50 INITIAL_BALANCE=1000
round bad_input
T="fault_badin_$$"
topic "$T" 2
MAXP=20000
BATCH_MAX=100 fault_config "$T" "    max_payload_bytes: $MAXP"
workload "$WORK/w.txt" "$WORK/keys.txt" 3000 2000

long=$(head -c 600 /dev/zero | tr '\0' 'L')
longkey="sha256:$(printf '%s/PAY' "L-$long" | sha256sum | cut -d' ' -f1)"
deep=$(printf '%*s' 3000 '' | sed 's/ /[/g')$(printf '%*s' 3000 '' | sed 's/ /]/g')
big=$(head -c $((MAXP + 100)) /dev/zero | tr '\0' 'x')
# name|line: each bad line is tagged by its position so the DLQ can be checked per kind
{
        printf 'empty|\n'
        printf 'tombstone|\\N\n'
        printf 'utf8|{"order_id":"bad-\xff\xfe-1","user_id":4,"amount":10}\n'
        printf 'deep_bare|%s\n' "$deep"
        printf 'deep_keyed|{"order_id":"deep-1","user_id":4,"amount":10,"x":%s}\n' "$deep"
        printf 'oversized|{"order_id":"big-1","user_id":4,"amount":10,"pad":"%s"}\n' "$big"
} >"$WORK/bad.txt"
nbad=$(wc -l <"$WORK/bad.txt")
# interleave: a bad one every 400 records, the long key near the start and the end
awk -v bad="$WORK/bad.txt" -v long="L-$long" 'BEGIN { while ((getline l < bad) > 0) b[n++] = l }
        { print }
        NR == 150 || NR == 2850 { printf "{\"order_id\":\"%s\",\"user_id\":7,\"amount\":10}\n", long }
        NR % 400 == 200 && k < n { l = b[k++]; sub(/^[a-z_0-9]*\|/, "", l); print l }' \
        "$WORK/w.txt" >"$WORK/w2.txt"
echo "$longkey" >>"$WORK/keys.txt"
spread "$WORK/w2.txt" "$WORK/ws.txt"
"$KT" produce -t "$T" <"$WORK/ws.txt"
total=$(produced "$T")
((total == 3000 + 2 + nbad)) || fail "produced $total records, expected $((3000 + 2 + nbad))"

fl_start d1 "$CFG"
start_s=$SECONDS
wait_done "$T" 60
took=$((SECONDS - start_s))
stop d1
log "ok: all $total records processed in ${took} s (no stall)"

"$KT" dump -t "$T.dlq" >"$WORK/dlq.txt"
anom=0
reasons=$(grep -c '^  dedupd.reason=' "$WORK/dlq.txt" || true)
# each bad record by its position in the topic, and its dead letter by origin
"$KT" dump -t "$T" | LC_ALL=C awk '/^[0-9]+ [0-9]+ /{p=$1; o=$2; v=$0; sub(/^[0-9]+ [0-9]+ [^ ]* /, "", v)
        if (v == "") print "empty|tombstone", p, o
        else if (index(v, "bad-")) print "utf8", p, o
        else if (substr(v, 1, 5) == "[[[[[") print "deep_bare", p, o
        else if (index(v, "deep-1")) print "deep_keyed", p, o
        else if (index(v, "big-1")) print "oversized", p, o }' >"$WORK/badpos.txt"
LC_ALL=C awk '/^[0-9]+ [0-9]+ /{if (r != "") print p, o, r; p = o = r = ""}
        /^  dedupd.origin.partition=/{p = substr($0, 27)}
        /^  dedupd.origin.offset=/{o = substr($0, 24)}
        /^  dedupd.reason=/{r = substr($0, 17)}
        END {if (r != "") print p, o, r}' "$WORK/dlq.txt" >"$WORK/dlqpos.txt"
# the reason each kind must carry (today's wording, matched loosely)
declare -A WANT=([empty|tombstone]="empty" [utf8]="UTF-8|unable to decode" [deep_bare]="JSON"
        [deep_keyed]="JSON" [oversized]="payload too large")
while read -r kind p o; do
        reason=$(awk -v p="$p" -v o="$o" '$1 == p && $2 == o {$1 = $2 = ""; print substr($0, 3); exit}' "$WORK/dlqpos.txt")
        if [[ -z $reason ]]; then
                log "ANOMALY: $kind (partition $p offset $o) is not in $T.dlq"
                anom=$((anom + 1))
        elif ! grep -Eq "${WANT[$kind]}" <<<"$reason"; then
                log "ANOMALY: $kind (partition $p offset $o) dead-lettered with an unexpected reason: $reason"
                anom=$((anom + 1))
        else
                log "ok: $kind (partition $p offset $o) dead-lettered: $reason"
        fi
done <"$WORK/badpos.txt"
found=$(wc -l <"$WORK/badpos.txt")
((found == nbad)) || { log "ANOMALY: found $found of the $nbad bad records in the topic"; anom=$((anom + 1)); }
((reasons == nbad)) || { log "ANOMALY: $reasons dead letters for $nbad bad records"; anom=$((anom + 1)); }

# the long key: one record, stored hashed, one effect although sent twice
lk=$(sql "SELECT count(*) FROM dedupd.keys WHERE idem_key = '$longkey'")
lk_eff=$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key = '$longkey'")
lk_status=$(sql "SELECT status FROM dedupd.keys WHERE idem_key = '$longkey'")
if ((lk == 1)) && [[ $lk_status == DONE ]] && ((lk_eff == 1)); then
        log "ok: key of $((${#long} + 6)) bytes stored as $longkey, status DONE, 1 effect for 2 deliveries"
else
        log "ANOMALY: long key $longkey: $lk records (status '$lk_status'), $lk_eff effects"
        anom=$((anom + 1))
fi
long_rows=$(sql "SELECT count(*) FROM dedupd.keys WHERE length(idem_key) > 512")
((long_rows == 0)) || { log "ANOMALY: $long_rows keys stored longer than 512 bytes"; anom=$((anom + 1)); }
finish_round "$T" "$WORK/keys.txt" "$anom" "bad=$nbad took=${took}s"
