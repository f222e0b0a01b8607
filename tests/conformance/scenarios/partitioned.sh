#!/usr/bin/env bash
# Partitioned retention (docs/partitioned-retention.md) on every broker:
# keys.layout: partitioned with each key's bucket from its payload's date.
# Orders of today and yesterday, each sent three times, apply once each under
# their day's key in dedupd.keys_p; an order dated five days ago (past keep 2d
# + keys.skew 1d) goes to the dead-letter destination unchanged, "too old to
# prove"; everything acknowledged. Then the same namespace bucketed by the
# messages' own timestamps (the broker's, or the time read where it has none):
# new orders, each sent twice, apply once each in today's bucket.
. "$(dirname "$0")/../lib.sh"

b_setup pay_part 1
day() { date -u -d "@$(($(date +%s) + $1 * 86400))" +%F; }
D0=$(day 0) D1=$(day -1) D5=$(day -5)
layout="keys: {layout: partitioned}
retention_classes:
  short: {keep: 2d, allow_shorter_than_topic: true}"
b_config "$WORK/c.yaml" "    retention: short
    bucket_from: \"{json:order_date}\"
$layout"
order() { printf '{"order_id":"%s","user_id":5,"amount":1,"order_date":"%s"}\n' "$1" "$2"; }
{
        for i in 1 2 3; do order p-1 "$D0"; order p-2 "$D0"; order p-3 "$D1"; order p-4 "${D1}T22:00:00-05:00"; done
        order p-old "$D5"
} | b_produce
assert_eq "$(b_count)" 13 "messages produced"
start d1 "$WORK/c.yaml"
b_wait_done
stop d1
b_check_started d1
keys() { sql "SELECT string_agg(idem_key, ' ' ORDER BY idem_key) FROM dedupd.keys_p WHERE namespace = 'it-$ID'"; }
assert_eq "$(keys)" "@$D1|p-3/PAY @$D1|p-4/PAY @$D0|p-1/PAY @$D0|p-2/PAY" "the keys, each with its bucket"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = 'it-$ID'")" 0 "keys in dedupd.keys"
assert_eq "$(sql "SELECT count(*) || ' ' || count(DISTINCT idem_key) FROM transfer_ledger")" "4 4" "effects, distinct keys"
assert_eq "$(sql "SELECT sum(applied) || '/' || sum(duplicates) || '/' || sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$NAME_B'")" "4/8/1" "applied/duplicates/dead-lettered"
b_check_acked
b_dead_letters "$WORK/dlq.txt"
assert_eq "$(wc -l <"$WORK/dlq.txt")" 1 "dead letters"
dead_letter_of "$WORK/dlq.txt" "$(b_origin 13)" "too old to prove: bucket $D5 ended more than keep + keys.skew (3d) ago" >/dev/null ||
        fail "no 'too old to prove' dead letter of message 13: $(cut -c1-300 "$WORK/dlq.txt")"
grep -qF "\"order_id\":\"p-old\"" "$WORK/dlq.txt" || fail "the dead letter's body changed: $(cut -c1-300 "$WORK/dlq.txt")"

# by the messages' own timestamps
b_config "$WORK/ts.yaml" "    retention: short
$layout"
for i in 1 2; do for n in 1 2 3; do order "t-$n" ""; done; done | b_produce
start d2 "$WORK/ts.yaml"
b_wait_done
stop d2
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys_p WHERE namespace = 'it-$ID' AND idem_key LIKE '@$D0|t-%'")" 3 \
        "timestamped orders in today's bucket"
assert_eq "$(sql "SELECT count(*) || ' ' || count(DISTINCT idem_key) FROM transfer_ledger")" "7 7" "effects, distinct keys"
b_check_acked
