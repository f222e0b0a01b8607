#!/usr/bin/env bash
# PostgreSQL stopped (-m immediate) mid-run and restarted: dedupd pauses, stays
# in its group, commits no offset it has not recorded, resumes, loses nothing.
. "$(dirname "$0")/lib.sh"

T="pay_dbdown_$$"
export SEED_ACCOUNTS=50 INITIAL_BALANCE=3000
topic "$T" 4
write_config "$WORK/c.yaml" "$T"
workload "$WORK/w.txt" "$WORK/keys.txt" 4000 3000
start d1 "$WORK/c.yaml"
# A first part before the outage, the rest while the database is down: dedupd
# is fast enough to finish 4,000 messages before pg-stop lands, and the
# outage must meet messages to be worth testing.
head -n 1000 "$WORK/w.txt" | "$KT" produce -t "$T"
for ((i = 0; i < 200; i++)); do
        (($(progressed "$T") >= 500)) && break
        sleep 0.05
done

"$DEDUPD_SERVICES" pg-stop immediate
log "PostgreSQL stopped at $(date +%T)"
tail -n +1001 "$WORK/w.txt" | "$KT" produce -t "$T"
sleep 4
kill -0 "${PIDS[d1]}" 2>/dev/null || fail "dedupd died while the database was down"
committed_down=$("$KT" offsets -t "$T" -g "grp-$ID" | awk '$1!="total" && $4>0 {s+=$4} END {print s+0}')
"$DEDUPD_SERVICES" pg-start
log "PostgreSQL started at $(date +%T)"
# Kafka may never be ahead of the database: its offsets are committed after COMMIT.
db_at_restart=$(progressed "$T")
((committed_down <= db_at_restart)) || fail "Kafka committed $committed_down while the database had $db_at_restart"
log "ok: Kafka committed $committed_down <= database $db_at_restart"

wait_done "$T" 120
stop d1
grep -q "database unavailable" "$WORK/d1.log" || fail "the outage was not reported"
grep -q "paused fetching" "$WORK/d1.log" || fail "fetching was not paused during the outage"
grep -q "resumed fetching" "$WORK/d1.log" || fail "fetching did not resume"
if sed -n '/database unavailable/,/resumed fetching/p' "$WORK/d1.log" | grep -q "partitions revoked"; then
        fail "dedupd left its group during the outage"
fi
assert_eq "$(sql "SELECT coalesce(sum(dead_lettered),0) FROM dedupd.offsets")" 0 "messages dead-lettered because of the outage"
log "ok: paused, stayed in the group, resumed"
check_invariants "$WORK/keys.txt"
assert_eq "$(kafka_lag "$T")" 0 "Kafka consumer lag"
