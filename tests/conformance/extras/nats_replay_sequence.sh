#!/usr/bin/env bash
# NATS JetStream only (a named extra of the conformance suite, whose replay
# scenario covers replay by time and to the beginning): verify shows the
# consumer's backlog; replay by stream sequence moves the consumer and
# dedupd.offsets together, verify says how far behind dedupd is until it has
# caught up; --reproduce is Kafka's alone.
. "$(dirname "$0")/../../integration/lib.sh"
. "$(dirname "$0")/../../integration/nats_lib.sh"

C="$WORK/c.yaml"
nats_stream
write_nats_config "$C"
position() { sql "SELECT next_offset FROM dedupd.offsets WHERE topic = '$SUBJ'"; }
dups() { sql "SELECT sum(duplicates) FROM dedupd.offsets WHERE topic = '$SUBJ'"; }
workload "$WORK/pay.txt" "$WORK/keys.txt" 600 400
publish <"$WORK/pay.txt"
start d1 "$C"
nats_done
rc=0; "$DEDUPCTL" verify -c "$C" --expect-caught-up >"$WORK/verify1.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "verify after the first run exits"
grep -q "lag (stream $STREAM" "$WORK/verify1.out" || fail "verify shows no NATS lag: $(cat "$WORK/verify1.out")"
stop d1
DUPS1=$(dups)

rc=0; "$DEDUPCTL" replay -c "$C" --topic "$SUBJ" --reproduce >"$WORK/bad.out" 2>&1 || rc=$?
assert_eq "$rc" 2 "replay --reproduce on NATS exits"

"$DEDUPCTL" replay -c "$C" --topic "$SUBJ" --to-offset 501 >"$WORK/seq.out" 2>&1 || fail "replay --to-offset 501: $(cat "$WORK/seq.out")"
assert_eq "$(position)" 501 "dedupd.offsets after the replay by sequence"
assert_eq "$(consumer_field delivered)" 500 "where the consumer stands after the replay by sequence"
rc=0; "$DEDUPCTL" verify -c "$C" --expect-caught-up >"$WORK/verify2.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "verify with a replay not yet absorbed exits"
grep -q "lag: $SUBJ is not caught up: last sequence 600, dedupd at 501" "$WORK/verify2.out" ||
        fail "verify does not say the subject is behind: $(grep lag: "$WORK/verify2.out")"
start d2 "$C"
nats_done
stop d2
assert_eq "$(($(dups) - DUPS1))" 100 "messages delivered again by sequence and absorbed"
