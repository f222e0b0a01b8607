#!/usr/bin/env bash
# dedupctl replay and verify: a reset is refused while dedupd runs and moves Kafka and
# dedupd.offsets together once it is stopped; a whole replayed topic (reset, then
# re-produced) changes no effect and verify counts it as duplicates; a planted second
# effect makes verify fail naming the key.
. "$(dirname "$0")/lib.sh"

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
workload "$WORK/pay.txt" "$WORK/keys.txt" 3000 2000
awk -F'"' '{print $4 "\t" $0}' "$WORK/pay.txt" | "$KT" produce -t "$T" -H "source=replay-it"
N=$(produced "$T")
assert_eq "$N" 3000 "records produced"

# ---- a first run: verify is clean
start d1 "$C"
wait_done "$T"
for _ in $(seq 1 100); do [[ $(kafka_lag "$T") == 0 ]] && break; sleep 0.1; done
rc=0; "$DEDUPCTL" verify -c "$C" --expect-caught-up >"$WORK/verify1.out" 2>&1 || rc=$?
cat "$WORK/verify1.out"
assert_eq "$rc" 0 "verify after the first run exits"
grep -q "no anomaly" "$WORK/verify1.out" || fail "verify printed no verdict"
assert_eq "$(awk '$1=="DONE" && $2 ~ /^[0-9]+$/{print $2}' "$WORK/verify1.out")" \
        "$(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'DONE'")" "DONE keys reported"

# ---- a reset while dedupd runs: refused, nothing moved
before_db=$(positions "$T") before_kafka=$(committed "$T")
rc=0; "$DEDUPCTL" replay -c "$C" --topic "$T" --to-beginning >"$WORK/refused.out" 2>&1 || rc=$?
cat "$WORK/refused.out"
assert_eq "$rc" 1 "replay while dedupd runs exits"
grep -q "group $G has active members.*stop the dedupd instances first" "$WORK/refused.out" ||
        fail "the refusal does not say why"
assert_eq "$(positions "$T")" "$before_db" "dedupd.offsets after the refused reset"
assert_eq "$(committed "$T")" "$before_kafka" "Kafka's committed offsets after the refused reset"
stop d1
EFFECTS=$(effects)

# ---- bad input: exit 2, nothing moved
for bad in "--topic nope_$$ --to-beginning" "--topic $T --to-beginning --partitions 0,7" \
        "--topic $T --to-time yesterday" "--topic $T --to-offset 999999" "--topic $T"; do
        rc=0
        # shellcheck disable=SC2086
        "$DEDUPCTL" replay -c "$C" $bad >"$WORK/bad.out" 2>&1 || rc=$?
        assert_eq "$rc" 2 "replay $bad exits"
        sed 's/^/    /' "$WORK/bad.out"
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

# ---- a planted second effect: verify fails and names the key
K=$(sql "SELECT idem_key FROM transfer_ledger ORDER BY idem_key LIMIT 1")
ORIGIN=$(sql "SELECT topic || '/' || partition || ' offset ' || \"offset\" FROM dedupd.keys WHERE idem_key = '$K'")
sql "INSERT INTO transfer_ledger (idem_key, user_id, amount) SELECT idem_key, user_id, amount FROM transfer_ledger WHERE idem_key = '$K'"
rc=0; "$DEDUPCTL" verify -c "$C" >"$WORK/verify4.out" 2>&1 || rc=$?
cat "$WORK/verify4.out"
assert_eq "$rc" 1 "verify with a key applied twice exits"
grep -qF "two-effects: key $K (from $ORIGIN): 2 rows in transfer_ledger" "$WORK/verify4.out" ||
        fail "verify does not name $K with its origin"
assert_eq "$(grep -c '^  two-effects: ' "$WORK/verify4.out")" 1 "keys reported with two effects"

# A DONE key whose effect vanished, and a FAILED key that has one, are named too.
D=$(sql "SELECT idem_key FROM dedupd.keys WHERE status = 'DONE' AND idem_key <> '$K' ORDER BY idem_key LIMIT 1")
F=$(sql "SELECT idem_key FROM dedupd.keys WHERE status = 'FAILED' ORDER BY idem_key LIMIT 1")
[[ -n $F ]] || fail "the workload produced no FAILED key"
sql "DELETE FROM transfer_ledger WHERE idem_key = '$D'"
sql "INSERT INTO transfer_ledger (idem_key, user_id, amount) VALUES ('$F', 1, 1)"
rc=0; "$DEDUPCTL" verify -c "$C" >"$WORK/verify5.out" 2>&1 || rc=$?
sed -n '/anomal/,$p' "$WORK/verify5.out"
assert_eq "$rc" 1 "verify with three anomalies exits"
grep -qF "done-without-effect: key $D " "$WORK/verify5.out" || fail "DONE key without effect not named"
grep -qF "failed-with-effect: key $F " "$WORK/verify5.out" || fail "FAILED key with an effect not named"
grep -q "^3 anomalies:" "$WORK/verify5.out" || fail "anomaly count"
log "PASS"
