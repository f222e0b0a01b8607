#!/usr/bin/env bash
# Case 6: a zombie. Instances b and z share a group and a 4-partition topic
# whose records are keyed by user, so each member's partitions touch their own
# accounts only. z runs with DEDUPD_FAULT=before_commit:N:stop: on its N-th
# batch it stops itself (SIGSTOP) inside the open transaction — keys claimed,
# accounts debited, nothing committed. z cannot heartbeat: after
# session.timeout.ms (6 s) the group gives z's partitions to b, b starts them
# from the database's offsets — the zombie's batch again — and blocks on what
# the zombie holds: its claim looks optimistically (the zombie's keys are not
# committed, so not there), its handler waits on the zombie's locked accounts
# (or its keys' INSERT on the zombie's uncommitted keys). z is then resumed
# (SIGCONT): its late COMMIT goes through, b's INSERT of the keys meets them on
# the primary key, and b's batch is rolled back and retried at once with the
# pessimistic claim, which finds the keys taken and absorbs them; z's Kafka
# offset commit is refused by the group and z rejoins; both finish. Nothing may
# be doubled, nothing lost.
# shellcheck source=tests/faults/faultlib.sh
. "$(dirname "$0")/../faultlib.sh"

export SEED_ACCOUNTS=50 INITIAL_BALANCE=1000
round zombie
T="fault_zombie_$$"
topic "$T" 4
BATCH_MAX=100 fault_config "$T"
workload "$WORK/w.txt" "$WORK/keys.txt" 5000 3500
# Kafka key = user_id: an order, its duplicates and its account stay on one partition
sed -E 's/^(.*"user_id":([0-9]+).*)$/u\2\t\1/' "$WORK/w.txt" >"$WORK/wk.txt"
n=$((3 + FAULTS_ITER % 6))

# Both members start before the records exist (the transfer handler's init
# cannot run while a zombie holds its transaction: see the report of this suite).
fl_start b "$CFG"
for ((i = 0; i < 200; i++)); do grep -q "assigned $T/" "$WORK/b.log" && break; sleep 0.05; done
fl_start z "$CFG" "before_commit:$n:stop"
for ((i = 0; i < 400; i++)); do grep -q "assigned $T/" "$WORK/z.log" && break; sleep 0.05; done
grep -q "assigned $T/" "$WORK/z.log" || round_failed "z never got partitions"
sleep 0.5 # b's side of the rebalance
"$KT" produce -t "$T" <"$WORK/wk.txt"
total=$(produced "$T")

for ((i = 0; i < 600; i++)); do
        [[ $(proc_state z) == T ]] && break
        sleep 0.05
done
[[ $(proc_state z) == T ]] || round_failed "z did not stop itself at before_commit hit $n" "$total"
grep -q "fault point before_commit reached: raising SIGSTOP" "$WORK/z.log" || round_failed "no fault line in z's log" "$total"
# z's backend: the one idle in its transaction for seconds. b's own batches
# go on meanwhile, and between two of their statements b's backend is idle in
# transaction too, for a moment: taking that one for z's (as a LIMIT 1 over
# the idle ones did) left the test looking for a waiter other than b's.
zpid=""
for ((i = 0; i < 100; i++)); do
        zpid=$(sql "SELECT pid FROM pg_stat_activity WHERE datname = '$DB' AND application_name = 'dedupd'
                    AND state LIKE 'idle in transaction%' AND state_change < now() - interval '2 seconds'
                    ORDER BY state_change LIMIT 1")
        [[ -n $zpid ]] && break
        sleep 0.1
done
[[ -n $zpid ]] || round_failed "the stopped zombie holds no open transaction" "$total"
at_stop=$(progressed "$T")
log "ok: z stopped (SIGSTOP) at before_commit hit $n, backend $zpid idle in transaction, database at $at_stop of $total"

blocked=""
for ((i = 0; i < 600; i++)); do # session timeout + rebalance
        # a backend the zombie's locks block, whatever its application_name
        # and its wait event say at that instant
        blocked=$(sql "SELECT pid FROM pg_stat_activity WHERE datname = '$DB'
                       AND $zpid = ANY(pg_blocking_pids(pid)) LIMIT 1")
        [[ -n $blocked ]] && break
        sleep 0.05
done
[[ -n $blocked ]] || round_failed "b never reached the zombie's batch (nothing of b's waiting on a lock in 30 s)" "$total"
grep -q "assigned $T/" <(sed -n '/partitions revoked/,$p' "$WORK/b.log") || round_failed "b was never reassigned" "$total"
log "ok: b took over z's partitions; its batch (backend $blocked) waits on what the zombie holds"
sleep 1
kill -CONT "${PIDS[z]}"
log "z resumed (SIGCONT)"
wait_done "$T" 120
stop z
stop b
grep -q "was claimed by another transaction meanwhile: batch retried with a pessimistic claim" "$WORK/b.log" ||
        round_failed "b's batch over the zombie's keys did not conflict (no pessimistic retry logged)" "$total"
grep -q "partitions revoked" "$WORK/z.log" || fail "z never noticed it had lost its partitions"
{ grep -h "COMMITFAIL\|final offset commit\|Offset commit" "$WORK/z.log" || true; } | head -n 2 | cut -c 1-240 | sed "s/^/[$TEST] z: /"
# the zombie's batch was committed twice: by z (late, with the effects) and by b
# (every key found claimed); only the first has effects
twice=$(sql "SELECT count(*) FROM (SELECT partition, from_offset FROM dedupd.progress_log
             WHERE topic = '$T' GROUP BY 1, 2 HAVING count(*) > 1) d" 2>/dev/null || echo "?")
log "batches committed twice (zombie + new owner): $twice"
ahead=$(kafka_ahead "$T")
finish_round "$T" "$WORK/keys.txt" "$ahead" "stop_hit=$n twice=$twice"
