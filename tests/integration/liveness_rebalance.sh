#!/usr/bin/env bash
# Never stall after a failure plus a rebalance. Two members share a group;
# while one of them waits for the database, which is down, the group
# rebalances. Before the fix the survivor paused its new partitions because it
# was still "paused" and never resumed them: alive and silent, with lag. Now
# every assigned partition is either fetching or waiting on something that
# ends, so it drains to lag 0 and `dedupctl verify --expect-caught-up` exits 0.
# (The same with a batch in backoff instead of the outage: liveness_backoff.)
. "$(dirname "$0")/lib.sh"
SERVICES=$ROOT/scripts/services
on_exit '"$SERVICES" pg-start >/dev/null 2>&1'

# The database goes down, then a member leaves: the survivor is given every
# partition while it waits for the database.
export SEED_ACCOUNTS=50 INITIAL_BALANCE=1000
T="live_dbdown_$$"
topic "$T" 4
BATCH_MAX=100 write_config "$WORK/a.yaml" "$T"
workload "$WORK/w.txt" "$WORK/keys.txt" 3000 2000
awk '{printf "m%d\t%s\n", NR, $0}' "$WORK/w.txt" >"$WORK/ws.txt" # spread over partitions
start a "$WORK/a.yaml"
start b "$WORK/a.yaml"
wait_assigned a "$T"
wait_assigned b "$T"
head -n 600 "$WORK/ws.txt" | "$KT" produce -t "$T"
wait_done "$T" 60
"$SERVICES" pg-stop immediate
log "PostgreSQL stopped; producing the rest while it is down"
tail -n +601 "$WORK/ws.txt" | "$KT" produce -t "$T"
sleep 2
stop b # leaves the group: a is assigned all four partitions while the database is down
for ((i = 0; i < 200; i++)); do grep -q "partitions revoked" "$WORK/a.log" && break; sleep 0.1; done
grep -q "partitions revoked" "$WORK/a.log" || fail "no rebalance reached a"
sleep 2
"$SERVICES" pg-start
log "PostgreSQL started again"
wait_done "$T" 90
stop a
check_invariants "$WORK/keys.txt"
assert_eq "$(kafka_lag "$T")" 0 "Kafka lag after the database outage and the rebalance"
verify_caught_up "$WORK/a.yaml"
