#!/usr/bin/env bash
# Kafka only (a named extra of the conformance suite, whose replay scenario
# covers the refusal, bad input, replay by time and to the beginning and
# verify's anomalies): what dedupctl replay says of each bad input and of
# its plan, Kafka's committed offsets and dedupd.offsets both at 0 after a
# reset; --reproduce writes the topic again record for record (key, value,
# headers, partition) and verify counts every copy as a duplicate; a reset
# by time on some partitions only, and verify naming the partitions behind.
. "$(dirname "$0")/../../integration/lib.sh"

T="pay_rv_$$"
G="grp-$ID"
topic "$T" 3
write_config "$WORK/d.yaml" "$T"
C="$WORK/d.yaml"

# committed TOPIC: Kafka's committed offsets of the group, "p:offset" per partition
committed() { "$KT" offsets -t "$1" -g "$G" | awk '$1!="total"{printf "%s:%s ", $1, $4}'; }
# positions TOPIC: dedupd.offsets.next_offset, "p:offset" per partition
positions() { sql "SELECT string_agg(partition || ':' || next_offset, ' ' ORDER BY partition) FROM dedupd.offsets WHERE topic = '$1'"; }
# effects: a digest of every effect and every balance
effects() { sql "SELECT (SELECT count(*) || '/' || sum(amount) FROM transfer_ledger) || ' ' || md5(string_agg(user_id || ':' || balance, ',' ORDER BY user_id)) FROM account"; }
# since_value FILE NAME: a counter of verify's "since" section
since_value() { awk -v n="$2" '/^since /{s=1; next} s && index($0, "  " n " ") == 1 {print $NF; exit}' "$1"; }
now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }

# Payments keyed by order (so each order stays in one partition), with a header.
workload "$WORK/pay.txt" "$WORK/keys.txt" 1500 1000
awk -F'"' '{print $4 "\t" $0}' "$WORK/pay.txt" | "$KT" produce -t "$T" -H "source=replay-it"
N=$(produced "$T")
assert_eq "$N" 1500 "records produced"
start d1 "$C"
wait_done "$T"
for _ in $(seq 1 100); do [[ $(kafka_lag "$T") == 0 ]] && break; sleep 0.1; done
stop d1
before_db=$(positions "$T")
EFFECTS=$(effects)

# ---- what bad input is told, nothing moved
for bad in "--topic $T --to-time yesterday" "--topic $T --to-offset 999999"; do
        rc=0
        # shellcheck disable=SC2086
        "$DEDUPCTL" replay -c "$C" $bad >"$WORK/bad.out" 2>&1 || rc=$?
        assert_eq "$rc" 2 "replay $bad exits"
done
grep -q "partition 7 is out of range: topic $T has partitions 0..2" <("$DEDUPCTL" replay -c "$C" --topic "$T" --to-beginning --partitions 0,7 2>&1) ||
        fail "no clear message for a partition out of range"
grep -q "topic nope_$$ does not exist" <("$DEDUPCTL" replay -c "$C" --topic "nope_$$" --reproduce 2>&1) ||
        fail "no clear message for an unknown topic"
assert_eq "$(positions "$T")" "$before_db" "dedupd.offsets after bad input"

# ---- dry run: the plan, nothing moved
rc=0; "$DEDUPCTL" replay -c "$C" --topic "$T" --to-beginning --dry-run >"$WORK/dry.out" 2>&1 || rc=$?
cat "$WORK/dry.out"
assert_eq "$rc" 0 "dry run exits"
grep -q "dry run: nothing changed ($N records would be delivered again)" "$WORK/dry.out" || fail "dry run plan"
assert_eq "$(positions "$T")" "$before_db" "dedupd.offsets after the dry run"

# ---- reset to the beginning with dedupd stopped: Kafka and the table both at 0
T0=$(now)
sleep 0.05
rc=0; "$DEDUPCTL" replay -c "$C" --topic "$T" --to-beginning >"$WORK/reset.out" 2>&1 || rc=$?
cat "$WORK/reset.out"
assert_eq "$rc" 0 "replay --to-beginning exits"
assert_eq "$(committed "$T")" "0:0 1:0 2:0 " "Kafka's committed offsets after the reset"
assert_eq "$(positions "$T")" "0:0 1:0 2:0" "dedupd.offsets after the reset"
grep -q "reset 3 partitions of $T for group $G: $N records will be delivered again" "$WORK/reset.out" ||
        fail "no reset summary"

start d2 "$C"
wait_done "$T"
for _ in $(seq 1 100); do [[ $(kafka_lag "$T") == 0 ]] && break; sleep 0.1; done
stop d2
assert_eq "$(effects)" "$EFFECTS" "ledger and balances after the whole topic was delivered again"
rc=0; "$DEDUPCTL" verify -c "$C" --since "$T0" --expect-caught-up >"$WORK/verify2.out" 2>&1 || rc=$?
cat "$WORK/verify2.out"
assert_eq "$rc" 0 "verify --since after the reset exits"
assert_eq "$(since_value "$WORK/verify2.out" "duplicates absorbed")" "$N" "duplicates absorbed since the reset"
assert_eq "$(since_value "$WORK/verify2.out" "applied")" 0 "effects applied since the reset"

# ---- re-produce the whole topic, unchanged, as a misbehaving producer would
"$KT" offsets -t "$T" | awk '$1!="total"{print $1, $3}' >"$WORK/hi_before"
T1=$(now)
sleep 0.05
rc=0; "$DEDUPCTL" replay -c "$C" --topic "$T" --reproduce >"$WORK/reproduce.out" 2>&1 || rc=$?
cat "$WORK/reproduce.out"
assert_eq "$rc" 0 "replay --reproduce exits"
assert_eq "$(produced "$T")" $((2 * N)) "records in the topic after --reproduce"
grep -q "produced $N records again into 3 partitions of $T, every one acknowledged" "$WORK/reproduce.out" ||
        fail "no reproduce summary"
# Each partition's second half is its first half again: key, value and headers.
"$KT" dump -t "$T" >"$WORK/dump.txt"
while read -r p hi; do
        awk -v p="$p" -v hi="$hi" '
                /^[0-9]/ { keep = ($1 == p); half = ($2 < hi) ? "a" : "b"; if (keep) { $2 = ""; print half, $0 } ; next }
                keep { print half, $0 }' "$WORK/dump.txt" >"$WORK/p$p"
        cmp -s <(grep '^a' "$WORK/p$p" | cut -c3-) <(grep '^b' "$WORK/p$p" | cut -c3-) ||
                fail "partition $p: the re-produced records differ from the originals"
done <"$WORK/hi_before"
grep -q "source=replay-it" "$WORK/p0" || fail "headers not in the dump"
log "ok: re-produced records equal the originals (key, value, headers, partition)"

start d3 "$C"
wait_done "$T"
for _ in $(seq 1 100); do [[ $(kafka_lag "$T") == 0 ]] && break; sleep 0.1; done
stop d3
assert_eq "$(effects)" "$EFFECTS" "ledger and balances after the topic was produced twice"
rc=0; "$DEDUPCTL" verify -c "$C" --since "$T1" --expect-caught-up >"$WORK/verify3.out" 2>&1 || rc=$?
cat "$WORK/verify3.out"
assert_eq "$rc" 0 "verify after --reproduce exits"
assert_eq "$(since_value "$WORK/verify3.out" "duplicates absorbed")" "$N" "duplicates absorbed since --reproduce"

# ---- reset to a time: the start of the re-produced copies, in each partition
rc=0; "$DEDUPCTL" replay -c "$C" --topic "$T" --to-time "$T1" --partitions 1,2 >"$WORK/totime.out" 2>&1 || rc=$?
cat "$WORK/totime.out"
assert_eq "$rc" 0 "replay --to-time exits"
want="0:$((2 * $(awk '$1==0{print $2}' "$WORK/hi_before"))) $(awk '$1!=0{printf "%s%s:%s", sep, $1, $2; sep=" "}' "$WORK/hi_before")"
assert_eq "$(positions "$T")" "$want" "dedupd.offsets after --to-time on partitions 1,2"
rc=0; "$DEDUPCTL" verify -c "$C" --expect-caught-up >"$WORK/lag.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "verify --expect-caught-up with lag exits"
grep -q "lag: $T/1 is not caught up" "$WORK/lag.out" || fail "lag on partition 1 not listed"
if grep -q "lag: $T/0 " "$WORK/lag.out"; then fail "partition 0 reported lagging"; fi
start d4 "$C"
wait_done "$T"
stop d4
assert_eq "$(effects)" "$EFFECTS" "ledger and balances after the --to-time replay"

