#!/usr/bin/env bash
# Replay and verify where the broker can re-read what it delivered:
# dedupctl replay is refused while dedupd consumes, and refuses bad input,
# changing nothing; a dry run changes nothing; once dedupd is stopped it moves
# the broker's position and dedupd.offsets back together, by time and to the
# beginning; what is delivered again changes no effect and is counted as
# duplicates; dedupctl verify says caught up (or not, naming the topic) and
# names each planted anomaly with its key.
. "$(dirname "$0")/../lib.sh"

C="$WORK/c.yaml"
b_setup pay_rv 3
b_config "$C"
# effects: a digest of every effect and every balance
effects() { sql "SELECT (SELECT count(*) || '/' || sum(amount) FROM transfer_ledger) || ' ' || md5(string_agg(user_id || ':' || balance, ',' ORDER BY user_id)) FROM account"; }
dups() { sql "SELECT coalesce(sum(duplicates), 0) FROM dedupd.offsets WHERE topic = '$NAME_B'"; }
now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
# since_value FILE NAME: a counter of verify's "since" section
since_value() { awk -v n="$2" '/^since /{s=1; next} s && index($0, "  " n " ") == 1 {print $NF; exit}' "$1"; }
# replay EXPECTED_RC ARGS...: dedupctl replay -c C ARGS exits EXPECTED_RC (its output in $WORK/replay.out)
replay() {
        local want=$1 rc=0
        shift
        "$DEDUPCTL" replay -c "$C" "$@" >"$WORK/replay.out" 2>&1 || rc=$?
        sed 's/^/    /' "$WORK/replay.out"
        assert_eq "$rc" "$want" "replay $*: exit status"
}
# verify EXPECTED_RC OUT ARGS...: dedupctl verify -c C ARGS exits EXPECTED_RC, its output in OUT
verify() {
        local want=$1 out=$2 rc=0
        shift 2
        "$DEDUPCTL" verify -c "$C" "$@" >"$out" 2>&1 || rc=$?
        assert_eq "$rc" "$want" "verify $*: exit status"
}
# run_to_end NAME: a dedupd until everything is committed and acknowledged
run_to_end() { start "$1" "$C"; b_wait_done; stop "$1"; }

workload "$WORK/pay.txt" "$WORK/keys.txt" 3000 2000
head -n 2000 "$WORK/pay.txt" | b_produce "source:replay-it"
sleep 0.2
T_MID=$(now)
sleep 0.2
tail -n +2001 "$WORK/pay.txt" | b_produce "source:replay-it"
N=$(b_count)
assert_eq "$N" 3000 "messages produced"

# ---- a first run: verify is clean and caught up
start d1 "$C"
b_wait_done
b_check_acked
verify 0 "$WORK/verify1.out" --expect-caught-up
grep -q "no anomaly" "$WORK/verify1.out" || fail "verify printed no verdict: $(cat "$WORK/verify1.out")"
assert_eq "$(awk '$1=="DONE" && $2 ~ /^[0-9]+$/{print $2}' "$WORK/verify1.out")" \
        "$(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'DONE'")" "DONE keys reported"
DUPS1=$(dups) ACKED=$(b_acked)

# ---- a replay while dedupd consumes: refused, nothing moved
replay 1 --topic "$NAME_B" --to-beginning
grep -qE "$B_REPLAY_REFUSED" "$WORK/replay.out" || fail "the refusal does not say why"
assert_eq "$(b_committed)" "$N" "the database's position after the refused replay"
assert_eq "$(b_acked)" "$ACKED" "the broker's acknowledged position after the refused replay"
stop d1
EFFECTS=$(effects)

# ---- bad input: exit 2, nothing moved
replay 2 --topic "nope_$$" --to-beginning
replay 2 --topic "$NAME_B" --to-beginning --partitions 7
replay 2 --topic "$NAME_B"
# ---- a dry run: the plan, nothing moved
replay 0 --topic "$NAME_B" --to-beginning --dry-run
grep -q "^dry run: nothing changed" "$WORK/replay.out" || fail "the dry run does not say so"
assert_eq "$(b_committed)" "$N" "the database's position after bad input and the dry run"
assert_eq "$(b_acked)" "$ACKED" "the broker's acknowledged position after bad input and the dry run"

# ---- by time: from the first message produced after T_MID
replay 0 --topic "$NAME_B" --to-time "$T_MID"
assert_eq "$(b_committed)" 2000 "the database's position after the replay by time"
verify 1 "$WORK/lag.out" --expect-caught-up
grep -q "lag: $NAME_B.* is not caught up" "$WORK/lag.out" || fail "verify does not say $NAME_B is behind: $(grep lag "$WORK/lag.out")"
run_to_end d2
assert_eq "$(($(dups) - DUPS1))" 1000 "messages delivered again and absorbed (by time)"
assert_eq "$(effects)" "$EFFECTS" "effects and balances after the replay by time"

# ---- the whole topic again
T0=$(now)
sleep 0.05
replay 0 --topic "$NAME_B" --to-beginning
assert_eq "$(b_committed)" 0 "the database's position after the replay to the beginning"
run_to_end d3
b_check_acked
assert_eq "$(($(dups) - DUPS1))" 4000 "messages delivered again and absorbed (by time, then all)"
assert_eq "$(effects)" "$EFFECTS" "effects and balances after the whole replay"
verify 0 "$WORK/verify2.out" --since "$T0" --expect-caught-up
grep -q "no anomaly" "$WORK/verify2.out" || fail "verify printed no verdict"
assert_eq "$(since_value "$WORK/verify2.out" "duplicates absorbed")" "$N" "duplicates absorbed since the replay"
assert_eq "$(since_value "$WORK/verify2.out" "applied")" 0 "effects applied since the replay"

# ---- a planted second effect: verify fails and names the key with its origin
K=$(sql "SELECT idem_key FROM transfer_ledger ORDER BY idem_key LIMIT 1")
ORIGIN=$(sql "SELECT topic || '/' || partition || ' offset ' || \"offset\" FROM dedupd.keys WHERE idem_key = '$K'")
sql "INSERT INTO transfer_ledger (idem_key, user_id, amount) SELECT idem_key, user_id, amount FROM transfer_ledger WHERE idem_key = '$K'"
verify 1 "$WORK/verify4.out"
grep -qF "two-effects: key $K (from $ORIGIN): 2 rows in transfer_ledger" "$WORK/verify4.out" ||
        fail "verify does not name $K with its origin: $(grep anomal -A3 "$WORK/verify4.out")"
assert_eq "$(grep -c '^  two-effects: ' "$WORK/verify4.out")" 1 "keys reported with two effects"
# A DONE key whose effect vanished, and a FAILED key that has one, are named too.
D=$(sql "SELECT idem_key FROM dedupd.keys WHERE status = 'DONE' AND idem_key <> '$K' ORDER BY idem_key LIMIT 1")
F=$(sql "SELECT idem_key FROM dedupd.keys WHERE status = 'FAILED' ORDER BY idem_key LIMIT 1")
[[ -n $F ]] || fail "the workload produced no FAILED key"
sql "DELETE FROM transfer_ledger WHERE idem_key = '$D'"
sql "INSERT INTO transfer_ledger (idem_key, user_id, amount) VALUES ('$F', 1, 1)"
verify 1 "$WORK/verify5.out"
grep -qF "done-without-effect: key $D " "$WORK/verify5.out" || fail "DONE key without effect not named"
grep -qF "failed-with-effect: key $F " "$WORK/verify5.out" || fail "FAILED key with an effect not named"
grep -q "^3 anomalies:" "$WORK/verify5.out" || fail "anomaly count"
