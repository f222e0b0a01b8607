#!/usr/bin/env bash
# Where duplicates come from (issue 21 §5). With provenance.every: 1 every
# absorbed duplicate is recorded in dedupd.duplicates with its first
# delivery, and counted in dedupd_duplicates_sampled_total by origin and by
# the producer header's value. Known sources: a producer that sent five
# orders twice on their partition (same-partition), another that sent three
# again on the other partition (other-partition), one copy without the header
# and one whose header is not UTF-8, then a replay of partition 0 (redelivery
# of all 25 of its messages). dedupctl dupes reports them by origin, source
# and partition; with provenance.every: 0 nothing is recorded and dupes says
# so (exit 1).
. "$(dirname "$0")/lib.sh"

T="dupes_$$"
topic "$T" 2
export SEED_ACCOUNTS=50 INITIAL_BALANCE=1000
prov_config() {
        write_config "$1" "$T" "    provenance: {every: $2, header: producer-id}
http: {listen: \"127.0.0.1:0\"}"
}
prov_config "$WORK/c.yaml" 1
order() { printf 'u%d\t{"order_id":"o-%d","user_id":%d,"amount":1}\n' "$1" "$1" "$1"; }

# originals o-1..o-20, then o-1..o-5 again, on partition 0, by "checkout"
{ for i in $(seq 1 20); do order "$i"; done; for i in $(seq 1 5); do order "$i"; done; } |
        "$KT" produce -t "$T" -p 0 -H producer-id=checkout
start d1 "$WORK/c.yaml"
wait_done "$T"
# o-6..o-8 again on partition 1 by "mobile"; o-9 with no header; o-10 with a header that is not UTF-8
for i in 6 7 8; do order "$i"; done | "$KT" produce -t "$T" -p 1 -H producer-id=mobile
order 9 | "$KT" produce -t "$T" -p 1
order 10 | "$KT" produce -t "$T" -p 1 -H producer-id=$'\xff\xfeok'
wait_done "$T"
ADDR=$(metrics_addr d1)
metric() { curl -s "http://$ADDR/metrics" | awk -v m="$1 " 'index($0, m) == 1 {print $NF}'; }
# the samples are written (and counted) at most a second after their batches
counted() { [[ $(metric "dedupd_duplicate_delay_seconds_count{topic=\"$T\"}") == 10 ]]; }
poll 10 counted || true
assert_eq "$(metric "dedupd_duplicates_sampled_total{topic=\"$T\",origin=\"same-partition\",source=\"checkout\"}")" 5 "metric: same-partition copies by checkout"
assert_eq "$(metric "dedupd_duplicates_sampled_total{topic=\"$T\",origin=\"other-partition\",source=\"mobile\"}")" 3 "metric: other-partition copies by mobile"
assert_eq "$(metric "dedupd_duplicates_sampled_total{topic=\"$T\",origin=\"other-partition\",source=\"none\"}")" 1 "metric: the copy without a header"
assert_eq "$(metric "dedupd_duplicates_sampled_total{topic=\"$T\",origin=\"other-partition\",source=\"(not UTF-8)\"}")" 1 "metric: the copy whose header is not UTF-8"
assert_eq "$(metric "dedupd_duplicate_delay_seconds_count{topic=\"$T\"}")" 10 "metric: delays observed"
stop d1

"$DEDUPCTL" replay -c "$WORK/c.yaml" -t "$T" --to-beginning --partitions 0 >/dev/null
start d2 "$WORK/c.yaml"
wait_done "$T"
stop d2

by_origin=$(sql "SELECT string_agg(origin || '=' || n, ' ' ORDER BY origin) FROM
                 (SELECT origin, count(*) n FROM dedupd.duplicates WHERE namespace = 'it-$ID' GROUP BY 1) o")
assert_eq "$by_origin" "other-partition=5 redelivery=20 same-partition=10" "dedupd.duplicates by origin"
by_source=$(sql "SELECT string_agg(coalesce(source, '-') || '=' || n, ' ' ORDER BY source COLLATE \"C\") FROM
                 (SELECT source, count(*) n FROM dedupd.duplicates WHERE namespace = 'it-$ID' GROUP BY 1) o")
assert_eq "$by_source" "(not UTF-8)=1 checkout=30 mobile=3 -=1" "dedupd.duplicates by source"
assert_eq "$(sql "SELECT first_partition || '/' || first_offset || '/' || partition || '/' || \"offset\"
                  FROM dedupd.duplicates WHERE idem_key = 'o-7/PAY' AND partition = 1")" "0/6/1/1" "o-7's copy: first delivery at 0/6, the copy at 1/1"
assert_eq "$(sql "SELECT count(*) FROM dedupd.duplicates WHERE origin = 'redelivery' AND (partition, \"offset\") <> (first_partition, first_offset)")" 0 \
        "a redelivery is the first delivery's own message"
assert_eq "$(sql "SELECT count(*) FROM dedupd.duplicates WHERE delay_ms < 0")" 0 "no negative delay"

RC=0
"$DEDUPCTL" dupes -c "$WORK/c.yaml" --since 1h >"$WORK/dupes.out" 2>&1 || RC=$?
cat "$WORK/dupes.out"
assert_eq "$RC" 0 "dedupctl dupes exit code"
grep -q "35 sampled duplicate(s)" "$WORK/dupes.out" || fail "dupes: no total"
grep -Eq '^redelivery *\| *20\|' "$WORK/dupes.out" || fail "dupes: no redelivery row of 20"
grep -Eq '^checkout *\| *30\| *20\| *10\| *0\| *0$' "$WORK/dupes.out" || fail "dupes: checkout's row"
grep -Eq "^$T *\| *1\| *5\| *5\|" "$WORK/dupes.out" || fail "dupes: partition 1's row"
RC=0
"$DEDUPCTL" dupes -c "$WORK/c.yaml" --topic nope >"$WORK/dupes2.out" 2>&1 || RC=$?
assert_eq "$RC" 1 "dupes of a topic with nothing sampled"
RC=0
"$DEDUPCTL" dupes -c "$WORK/c.yaml" --since yesterday-ish >"$WORK/dupes3.out" 2>&1 || RC=$?
assert_eq "$RC" 2 "dupes with a --since that is neither a time nor a duration"
grep -q "neither a duration" "$WORK/dupes3.out" || fail "dupes: $(cat "$WORK/dupes3.out")"

# provenance.every: 0 records nothing; dupes says why
sql "DELETE FROM dedupd.duplicates"
prov_config "$WORK/off.yaml" 0
"$DEDUPCTL" replay -c "$WORK/off.yaml" -t "$T" --to-beginning >/dev/null
start d3 "$WORK/off.yaml"
wait_done "$T"
stop d3
assert_eq "$(sql "SELECT count(*) FROM dedupd.duplicates")" 0 "nothing recorded with provenance.every: 0"
RC=0
"$DEDUPCTL" dupes -c "$WORK/off.yaml" >"$WORK/dupes4.out" 2>&1 || RC=$?
assert_eq "$RC" 1 "dupes with nothing sampled"
grep -q "none is recorded (provenance.every: 0)" "$WORK/dupes4.out" || fail "dupes: $(cat "$WORK/dupes4.out")"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 20 "one effect per order through it all"
