#!/usr/bin/env bash
# SIGTERM mid-run: the batch in flight finishes or rolls back, what is committed
# is acknowledged, the group is left, exit 0 in bounded time. A second signal
# exits at once. Nothing is lost either way.
. "$(dirname "$0")/lib.sh"

T="pay_shutdown_$$"
export SEED_ACCOUNTS=50 INITIAL_BALANCE=3000
topic "$T" 2
write_config "$WORK/c.yaml" "$T"
workload "$WORK/w.txt" "$WORK/keys.txt" 6000 4000
"$KT" produce -t "$T" <"$WORK/w.txt"

start d1 "$WORK/c.yaml"
for ((i = 0; i < 400; i++)); do
        (($(progressed "$T") >= 1000)) && break
        sleep 0.02
done
t0=$(date +%s%N)
stop d1 # asserts exit 0
ms=$((($(date +%s%N) - t0) / 1000000))
log "ok: SIGTERM -> exit 0 in $ms ms"
((ms < 15000)) || fail "shutdown took $ms ms"
grep -q "stopped cleanly" "$WORK/d1.log" || fail "no clean-stop message"
# What the database committed is what Kafka has: nothing acknowledged beyond it.
kafka_committed=$("$KT" offsets -t "$T" -g "grp-$ID" | awk '$1!="total" && $4>0 {s+=$4} END {print s+0}')
assert_eq "$kafka_committed" "$(progressed "$T")" "Kafka committed offsets equal the database's after shutdown"

# Twice: the second signal exits immediately (128 + SIGTERM).
start d2 "$WORK/c.yaml"
sleep 2
kill -TERM "${PIDS[d2]}"
kill -TERM "${PIDS[d2]}"
rc=0
wait "${PIDS[d2]}" || rc=$?
unset "PIDS[d2]"
((rc == 0 || rc == 143)) || fail "double SIGTERM exit code $rc"
log "ok: double SIGTERM -> exit $rc"

start d3 "$WORK/c.yaml"
wait_done "$T"
stop d3
check_invariants "$WORK/keys.txt"
