#!/usr/bin/env bash
# NATS JetStream: kill -9 at random moments during a 10,000-message run with
# duplicates, restarted each time. What a killed dedupd held unacknowledged
# is delivered again after the restart (its consumer is put back at the
# database's position), and the dedup table absorbs it: every distinct key
# ends with exactly one effect or one recorded rejection, nothing missing,
# nothing doubled, nothing left unacknowledged.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"

export SEED_ACCOUNTS=50 INITIAL_BALANCE=3000 BATCH_MAX=100
require_fault_points
nats_stream
write_nats_config "$WORK/c.yaml"
workload "$WORK/w.txt" "$WORK/keys.txt" 10000 7000
publish <"$WORK/w.txt"
assert_eq "$(last_seq)" 10000 "messages in the stream"

# First the worst moment: the third batch committed, the process killed
# before a single one of its acks left. Those three batches hold 100 each
# (a batch that closes when nothing more is pulled may hold fewer on a busy
# machine, and the positions below would differ).
sed 's/^      max_wait_ms: 20$/      max_wait_ms: 5000\n      adaptive: false/' "$WORK/c.yaml" >"$WORK/full.yaml"
grep -q "adaptive: false" "$WORK/full.yaml" || fail "config not as expected: $(cat "$WORK/full.yaml")"
DEDUPD_FAULT=after_commit:3 start d1 "$WORK/full.yaml"
wait "${PIDS[d1]}" 2>/dev/null || true
unset "PIDS[d1]"
assert_eq "$(progressed "$SUBJ")" 301 "database position after the kill at the third COMMIT"
assert_eq "$(consumer_field ack_floor)" 200 "the consumer's acknowledged floor (the third batch never acked)"

RANDOM=$$
kills=1
# Each round: let it progress a random amount past the last crash, then kill -9.
while ((kills < 8)); do
        before=$(progressed "$SUBJ")
        ((before >= 10001)) && break
        target=$((before + RANDOM % 1500 + 1))
        ((target > 10001)) && target=10001
        start d1 "$WORK/c.yaml"
        for ((i = 0; i < 300; i++)); do
                (($(progressed "$SUBJ") >= target)) && break
                sleep 0.05
        done
        sleep "0.0$((RANDOM % 10))"
        crash d1
        kills=$((kills + 1))
        log "kill $kills: SIGKILL at database position $(progressed "$SUBJ") of 10001; $(consumer_field ack_pending) delivered, unacknowledged"
done
log "$kills kills"
start d1 "$WORK/c.yaml"
nats_done 180
stop d1

check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" 7000 "distinct keys recorded"
assert_eq "$(consumer_field ack_pending)" 0 "messages left unacknowledged"
assert_eq "$(consumer_field pending)" 0 "messages not yet delivered"
# A restart after a kill found deliveries in flight and started the consumer again where the database was.
grep -q "creating it again at stream sequence" "$WORK/d1.log" || fail "no restart put the consumer back at the database's position"
# The third batch, committed and never acked, came back and was absorbed (the
# workload itself holds 3000 duplicates).
dups=$(sql "SELECT sum(duplicates) FROM dedupd.offsets")
((dups >= 3100)) || fail "only $dups duplicates absorbed: the unacknowledged third batch was not delivered again"
log "effects: $(sql "SELECT count(*) FROM transfer_ledger"), rejections: $(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'FAILED'"), duplicates absorbed: $(sql "SELECT sum(duplicates) FROM dedupd.offsets")"
