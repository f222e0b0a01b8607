#!/usr/bin/env bash
# NATS JetStream: dedupctl replay moves the topic's consumer and dedupd.offsets
# back together (refused while a dedupd pulls from the consumer), by sequence
# and by time; the whole subject delivered again changes no effect, and
# dedupctl verify proves it was absorbed: no anomaly, caught up, every
# replayed message counted as a duplicate.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"

C="$WORK/c.yaml"
nats_stream
write_nats_config "$C"
position() { sql "SELECT next_offset FROM dedupd.offsets WHERE topic = '$SUBJ'"; }
effects() { sql "SELECT (SELECT count(*) || '/' || sum(amount) FROM transfer_ledger) || ' ' || md5(string_agg(user_id || ':' || balance, ',' ORDER BY user_id)) FROM account"; }
dups() { sql "SELECT sum(duplicates) FROM dedupd.offsets WHERE topic = '$SUBJ'"; }
now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }

workload "$WORK/pay.txt" "$WORK/keys.txt" 3000 2000
head -n 2000 "$WORK/pay.txt" | publish
T_MID=$(now)
sleep 0.2
tail -n +2001 "$WORK/pay.txt" | publish
assert_eq "$(last_seq)" 3000 "messages in the stream"

# ---- a first run: verify is clean and caught up
start d1 "$C"
nats_done
rc=0; "$DEDUPCTL" verify -c "$C" --expect-caught-up >"$WORK/verify1.out" 2>&1 || rc=$?
cat "$WORK/verify1.out"
assert_eq "$rc" 0 "verify after the first run exits"
grep -q "lag (stream $STREAM" "$WORK/verify1.out" || fail "verify shows no NATS lag"
DUPS1=$(dups)

# ---- a replay while dedupd pulls: refused, nothing moved
rc=0; "$DEDUPCTL" replay -c "$C" --topic "$SUBJ" --to-beginning >"$WORK/refused.out" 2>&1 || rc=$?
cat "$WORK/refused.out"
assert_eq "$rc" 1 "replay while dedupd runs exits"
grep -q "pull request(s) waiting: a dedupd is consuming it; stop it first" "$WORK/refused.out" || fail "the refusal does not say why"
assert_eq "$(position)" 3001 "dedupd.offsets after the refused replay"
stop d1
EFFECTS=$(effects)

# ---- bad input: exit 2
for bad in "--topic nope.$$ --to-beginning" "--topic $SUBJ --to-beginning --partitions 1" \
        "--topic $SUBJ --reproduce"; do
        rc=0
        # shellcheck disable=SC2086
        "$DEDUPCTL" replay -c "$C" $bad >"$WORK/bad.out" 2>&1 || rc=$?
        assert_eq "$rc" 2 "replay $bad exits"
done

# ---- a dry run: the plan, nothing moved
rc=0; "$DEDUPCTL" replay -c "$C" --topic "$SUBJ" --to-beginning --dry-run >"$WORK/dry.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "replay --dry-run exits"
grep -q "^dry run: nothing changed" "$WORK/dry.out" || fail "the dry run does not say so: $(cat "$WORK/dry.out")"
assert_eq "$(position)" 3001 "dedupd.offsets after the dry run"
assert_eq "$(consumer_field ack_floor)" 3000 "the consumer after the dry run"

# ---- by time: from the first message published after T_MID (sequence 2001)
rc=0; "$DEDUPCTL" replay -c "$C" --topic "$SUBJ" --to-time "$T_MID" >"$WORK/time.out" 2>&1 || rc=$?
cat "$WORK/time.out"
assert_eq "$rc" 0 "replay --to-time exits"
assert_eq "$(position)" 2001 "dedupd.offsets after the replay by time"
assert_eq "$(consumer_field delivered)" 2000 "where the consumer stands after the replay by time"
start d2 "$C"
nats_done
stop d2
assert_eq "$(($(dups) - DUPS1))" 1000 "messages delivered again and absorbed (by time)"
assert_eq "$(effects)" "$EFFECTS" "effects and balances after the replay by time"

# ---- the whole subject again
rc=0; "$DEDUPCTL" replay -c "$C" --topic "$SUBJ" --to-beginning >"$WORK/all.out" 2>&1 || rc=$?
cat "$WORK/all.out"
assert_eq "$rc" 0 "replay --to-beginning exits"
assert_eq "$(position)" 1 "dedupd.offsets after the replay to the beginning"
start d3 "$C"
nats_done
stop d3
assert_eq "$(($(dups) - DUPS1))" 4000 "messages delivered again and absorbed (by time, then all)"
assert_eq "$(effects)" "$EFFECTS" "effects and balances after the whole replay"
rc=0; "$DEDUPCTL" verify -c "$C" --expect-caught-up >"$WORK/verify2.out" 2>&1 || rc=$?
cat "$WORK/verify2.out"
assert_eq "$rc" 0 "verify after the replays exits"
grep -q "no anomaly" "$WORK/verify2.out" || fail "verify printed no verdict"

# ---- by sequence, then verify before dedupd has run: not caught up
"$DEDUPCTL" replay -c "$C" --topic "$SUBJ" --to-offset 2501 >/dev/null
rc=0; "$DEDUPCTL" verify -c "$C" --expect-caught-up >"$WORK/verify3.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "verify with a replay not yet absorbed exits"
grep -q "lag: $SUBJ is not caught up: last sequence 3000, dedupd at 2501" "$WORK/verify3.out" ||
        fail "verify does not say the subject is behind: $(grep lag: "$WORK/verify3.out")"
