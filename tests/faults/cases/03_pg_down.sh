#!/usr/bin/env bash
# Case 3: PostgreSQL stopped with `scripts/services pg-stop immediate` (no
# shutdown checkpoint, every backend killed, in-flight transactions lost) while
# dedupd is mid-run and a producer is still writing, restarted 5 s later.
# dedupd must survive, not acknowledge to Kafka what the database has not
# recorded, reconnect, and finish with the invariant intact.
# shellcheck source=tests/faults/faultlib.sh
. "$(dirname "$0")/../faultlib.sh"

export SEED_ACCOUNTS=50 INITIAL_BALANCE=1000
round pg_down
T="fault_pgdown_$$"
topic "$T" 4
BATCH_MAX=100 fault_config "$T"
workload "$WORK/w.txt" "$WORK/keys.txt" 8000 5000
spread "$WORK/w.txt" "$WORK/ws.txt"
split -n l/4 "$WORK/ws.txt" "$WORK/chunk."
fl_start d1 "$CFG"
(for c in "$WORK"/chunk.*; do "$KT" produce -t "$T" <"$c" || exit 1; sleep 1; done) &
prod=$!
wait_progress "$T" 1500 60 || round_failed "dedupd made no progress"

"$DEDUPD_SERVICES" pg-stop immediate
down_at=$SECONDS
log "PostgreSQL stopped (immediate)"
sleep 5
kill -0 "${PIDS[d1]}" 2>/dev/null || round_failed "dedupd died while the database was down"
committed_down=$(kafka_committed "$T")
"$DEDUPD_SERVICES" pg-start
log "PostgreSQL started after $((SECONDS - down_at)) s"
db_at_restart=$(progressed "$T")
ahead=0
if ((committed_down > db_at_restart)); then
        log "ANOMALY: Kafka committed $committed_down while the database had $db_at_restart"
        ahead=1
else
        log "ok: Kafka committed $committed_down <= database $db_at_restart during the outage"
fi
wait "$prod" || fail "producer failed"
wait_done "$T" 120
stop d1
grep -q "database unavailable" "$WORK/d1.log" || fail "the outage was not reported"
grep -q "database reconnected" "$WORK/d1.log" || fail "no reconnection was reported"
dl=$(sql "SELECT coalesce(sum(dead_lettered),0) FROM dedupd.offsets")
((dl == 0)) || log "ANOMALY: $dl messages dead-lettered because of the outage"
finish_round "$T" "$WORK/keys.txt" $((ahead + dl)) "down_for=5s"
