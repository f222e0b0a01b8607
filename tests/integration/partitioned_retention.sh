#!/usr/bin/env bash
# Partitioned retention (issue 21 §1): under keys.layout: partitioned each
# key begins with its bucket — the day of the order's own date, from the
# payload (bucket_from) — so every copy of an order, whenever it comes, has
# the same key in the same partition of dedupd.keys_p. Orders of today, one
# and two days ago apply once each, with their copies absorbed; an order of
# four days ago is past keep (2d) + keys.skew (1d): dead-lettered "too old to
# prove", as are an order dated three days ahead and one whose date is no
# date. A second topic buckets by the message's own timestamp: a resend a few
# seconds after midnight is looked up in the day before and absorbed, in the
# same batch as its first copy or a later one. With keep lowered the purge
# drops the partitions of the older days whole, and a late copy of an order
# whose partition went is dead-lettered, not run again; the continuous
# absorption check samples the partitions. A heap config on the namespace is
# refused by check and dedupd.
. "$(dirname "$0")/lib.sh"

T="buckets_$$"
T2="bucket_ts_$$"
topic "$T" 2
topic "$T2" 1
day() { date -u -d "@$(($(date +%s) + $1 * 86400))" +%F; }
D0=$(day 0) D1=$(day -1) D2=$(day -2) D4=$(day -4) DF=$(day 3)
bucket_config() {
        write_config "$1" "$T" "    bucket_from: \"{json:order_date}\"
    retention: short
$(transfer_topic "$T2")
    retention: short
keys: {layout: partitioned, skew: ${3:-1d}}
absorption_check: {interval: 1s}
retention_classes:
  short: {keep: $2, allow_shorter_than_topic: true}"
}
bucket_config "$WORK/c.yaml" 2d
bucket_config "$WORK/c2.yaml" 1s 0s
order() { printf 'u%d\t{"order_id":"o-%d","user_id":%d,"amount":1,"order_date":"%s"}\n' "$1" "$1" "$1" "$2"; }
{
        order 1 "$D0"; order 2 "$D0"; order 3 "${D0}T23:59:59+09:00"; order 4 "$D1"; order 5 "$D2"
        order 1 "$D0"; order 4 "$D1"; order 5 "$D2"
        order 6 "$D4"; order 7 "$DF"; order 8 "yesterday"
} | "$KT" produce -t "$T"
MIDNIGHT=$(($(date -u -d "$D0" +%s) * 1000))
# o-20's resend comes in the same batch as its first copy, o-21's in a later one
order 20 "" | "$KT" produce -t "$T2" -T $((MIDNIGHT - 2000))
order 20 "" | "$KT" produce -t "$T2" -T $((MIDNIGHT + 5000))
order 21 "" | "$KT" produce -t "$T2" -T $((MIDNIGHT - 1000))

start d1 "$WORK/c.yaml"
wait_done "$T2"
order 21 "" | "$KT" produce -t "$T2" -T $((MIDNIGHT + 3000))
wait_done "$T"
wait_done "$T2"
stop d1
keys() { sql "SELECT string_agg(idem_key, ' ' ORDER BY idem_key) FROM dedupd.keys_p WHERE namespace = 'it-$ID' AND topic = '$1'"; }
assert_eq "$(keys "$T")" "@$D2|o-5/PAY @$D1|o-4/PAY @$D0|o-1/PAY @$D0|o-2/PAY @$D0|o-3/PAY" "the keys, each with its bucket"
assert_eq "$(keys "$T2")" "@$D1|o-20/PAY @$D1|o-21/PAY" "the timestamped orders, in the bucket of their first copies"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = 'it-$ID'")" 0 "nothing in dedupd.keys"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 7 "one effect per order"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys_p WHERE namespace = 'it-$ID' AND expires_at IS NOT NULL")" 0 \
        "no key expires by itself: its partition goes"
assert_eq "$(sql "SELECT count(DISTINCT tableoid) FROM dedupd.keys_p WHERE namespace = 'it-$ID' AND idem_key LIKE '@$D0|%'")" 1 \
        "today's keys in one partition"
assert_eq "$(sql "SELECT count(*) FROM dedupd.key_partitions WHERE namespace = 'it-$ID' AND bucket = '$D0'::date + 2")" 1 \
        "the partitions ahead made (skew and one bucket)"
"$KT" dump -t "$T.dlq" >"$WORK/dlq.txt"
grep -q "dedupd.reason=too old to prove: bucket $D4 ended more than keep + keys.skew (3d) ago" "$WORK/dlq.txt" ||
        fail "no too-old dead letter: $(cat "$WORK/dlq.txt")"
grep -q "dedupd.reason=bucket $DF: its time is more than keys.skew (1d) ahead of now" "$WORK/dlq.txt" ||
        fail "no dead letter for the order ahead: $(cat "$WORK/dlq.txt")"
grep -q "dedupd.reason=bucket_from: 'yesterday' is not a date" "$WORK/dlq.txt" || fail "no dead letter for the bad date"
assert_eq "$(grep -c "dedupd.reason=" "$WORK/dlq.txt")" 3 "dead letters"
grep -q "in the bucket before: absorbed" "$WORK/d1.log" || fail "o-21's resend after midnight was not looked up in the day before"
grep -q "repeat another of it under its previous key" "$WORK/d1.log" || fail "o-20's resend was not taken for its first copy in the batch"
"$DEDUPCTL" inspect -c "$WORK/c.yaml" "@$D1|o-4/PAY" >"$WORK/inspect.out" || fail "inspect: $(cat "$WORK/inspect.out")"
grep -q "DONE" "$WORK/inspect.out" || fail "inspect: $(cat "$WORK/inspect.out")"
RC=0; "$DEDUPCTL" inspect -c "$WORK/c.yaml" "o-4/PAY" >"$WORK/inspect2.out" 2>&1 || RC=$?
assert_eq "$RC" 1 "inspect of a key without its bucket"
grep -q "a key begins with its bucket, e.g. '@2026-12-01|o-4/PAY'" "$WORK/inspect2.out" || fail "inspect: $(cat "$WORK/inspect2.out")"
"$DEDUPCTL" verify -c "$WORK/c.yaml" >"$WORK/verify.out" 2>&1 || fail "verify: $(cat "$WORK/verify.out")"
"$DEDUPCTL" plan -c "$WORK/c.yaml" --rate 100/s >"$WORK/plan.out" || fail "plan: $(cat "$WORK/plan.out")"
grep -q "dedupd.keys_p has only [0-9]* rows" "$WORK/plan.out" || fail "plan did not read dedupd.keys_p: $(cat "$WORK/plan.out")"
grep -q "(this config's: partitioned; partitioned with bucket 1d, skew 1d" "$WORK/plan.out" || fail "plan: $(cat "$WORK/plan.out")"

# keep lowered to 1s and no skew: every bucket before today ends more than keep + skew ago
"$DEDUPCTL" purge -c "$WORK/c2.yaml" --dry-run >"$WORK/dry.out" || fail "purge --dry-run: $(cat "$WORK/dry.out")"
grep -Eq "^partitions to drop: +[1-9]" "$WORK/dry.out" || fail "dry run: $(cat "$WORK/dry.out")"
"$DEDUPCTL" purge -c "$WORK/c2.yaml" >"$WORK/purge.out" || fail "purge: $(cat "$WORK/purge.out")"
grep -Eq "^partitions dropped: +[1-9][0-9]* of 4 key\(s\)" "$WORK/purge.out" || fail "purge: $(cat "$WORK/purge.out")"
assert_eq "$(keys "$T")" "@$D0|o-1/PAY @$D0|o-2/PAY @$D0|o-3/PAY" "today's keys kept, the older days' dropped with their partitions"
"$DEDUPCTL" stats -c "$WORK/c2.yaml" >"$WORK/stats.out" || fail "stats: $(cat "$WORK/stats.out")"
grep -Eq "^dropped: +[1-9][0-9]*, 4 key\(s\) with them" "$WORK/stats.out" || fail "stats: $(cat "$WORK/stats.out")"
grep -q "^provable: from bucket $D0 " "$WORK/stats.out" || fail "stats: $(cat "$WORK/stats.out")"
assert_eq "$(sql "SELECT count(*) FROM dedupd.key_partitions WHERE namespace = 'it-$ID' AND dropped_at IS NOT NULL AND bucket = '$D1'")" 1 \
        "the dropped bucket recorded"
{ order 4 "$D1"; order 1 "$D0"; } | "$KT" produce -t "$T"
# the continuous absorption check samples dedupd.keys_p's partitions: a second
# effect of o-1, added by hand, is found
sql "INSERT INTO transfer_ledger (idem_key, user_id, amount) VALUES ('@$D0|o-1/PAY', 1, 1)"
start d2 "$WORK/c2.yaml"
wait_done "$T"
has_violation() { grep -q "ERROR \[absorption\] topic $T: 1 of [0-9]* sampled keys break the one-effect rule in transfer_ledger(idem_key): @$D0|o-1/PAY (DONE, 2 effects)" "$WORK/d2.log"; }
poll 30 has_violation || fail "the absorption check did not find o-1's second effect: $(grep absorption "$WORK/d2.log" | tail -3)"
stop d2
sql "DELETE FROM transfer_ledger WHERE id = (SELECT max(id) FROM transfer_ledger WHERE idem_key = '@$D0|o-1/PAY')"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 7 "neither the late copy nor today's copy ran again"
"$KT" dump -t "$T.dlq" >"$WORK/dlq2.txt"
assert_eq "$(grep -c "dedupd.reason=too old to prove: bucket $D1" "$WORK/dlq2.txt")" 1 "the late copy dead-lettered"

# the other layout on this namespace: refused
sed 's/layout: partitioned/layout: heap/; /bucket_from/d' "$WORK/c.yaml" >"$WORK/heap.yaml"
RC=0; "$DEDUPCTL" check -c "$WORK/heap.yaml" >"$WORK/check.out" 2>&1 || RC=$?
assert_eq "$RC" 1 "check of a heap config on a partitioned namespace"
grep -q "keys.layout is heap but namespace 'it-$ID' has keys in the other layout's table" "$WORK/check.out" ||
        fail "check: $(cat "$WORK/check.out")"
RC=0; timeout 60 "$DEDUPD" -c "$WORK/heap.yaml" >"$WORK/heap.log" 2>&1 || RC=$?
assert_eq "$RC" 1 "dedupd with a heap config on a partitioned namespace"
grep -q "keys.layout is heap but namespace 'it-$ID' has keys in dedupd.keys_p" "$WORK/heap.log" || fail "dedupd: $(cat "$WORK/heap.log")"
echo "PASS"
