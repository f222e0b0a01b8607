#!/usr/bin/env bash
# Case 2: the COMMIT's acknowledgement is lost — the transaction commits but
# the client sees its connection drop. COMMIT is made to wait for a synchronous
# standby that does not exist (synchronous_standby_names = 'nobody'): the commit
# record is written and flushed locally, then the backend waits (wait_event
# SyncRep). Terminating that backend ends the wait with "the transaction has
# already committed locally" and drops dedupd's connection mid-COMMIT. dedupd
# must reconnect, redeliver the batch to itself and absorb every key of it.
# shellcheck source=tests/faults/faultlib.sh
. "$(dirname "$0")/../faultlib.sh"

export SEED_ACCOUNTS=50 INITIAL_BALANCE=1000
su_sql() { psql "$PG_DSN" -X -q -t -A -v ON_ERROR_STOP=1 -c "$1"; }
restore_syncrep() {
        su_sql "ALTER SYSTEM RESET synchronous_standby_names" >/dev/null
        su_sql "SELECT pg_reload_conf()" >/dev/null
}
fl_on_exit restore_syncrep

round commit_ack_lost
T="fault_ack_$$"
topic "$T" 4
BATCH_MAX=100 fault_config "$T"
workload "$WORK/w.txt" "$WORK/keys.txt" 4000 2500
spread "$WORK/w.txt" "$WORK/ws.txt"
# the first part is consumed completely before COMMITs start to wait, so the
# first COMMIT that waits is certainly one of the second part's
first=$((1000 + FAULTS_ITER * 397 % 2000))
head -n "$first" "$WORK/ws.txt" >"$WORK/part1.txt"
tail -n +$((first + 1)) "$WORK/ws.txt" >"$WORK/part2.txt"
"$KT" produce -t "$T" <"$WORK/part1.txt"
fl_start d1 "$CFG"
wait_progress "$T" "$first" 60 || round_failed "dedupd did not consume the first $first records" "$first"

# every COMMIT from now on waits for the standby that never comes
su_sql "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" >/dev/null
su_sql "SELECT pg_reload_conf()" >/dev/null
sleep 0.3 # the reload reaches every backend
"$KT" produce -t "$T" <"$WORK/part2.txt"
total=$(produced "$T")
pid=""
for ((i = 0; i < 200; i++)); do
        pid=$(su_sql "SELECT pid FROM pg_stat_activity WHERE datname = '$DB' AND application_name = 'dedupd'
                      AND wait_event = 'SyncRep' LIMIT 1")
        [[ -n $pid ]] && break
        sleep 0.05
done
[[ -n $pid ]] || round_failed "no dedupd backend ever waited in SyncRep" "$total"
before=$(progressed "$T")
keys_before=$(sql "SELECT count(*) FROM dedupd.keys")
log "backend $pid waits in SyncRep for its COMMIT; visible progress $before, keys $keys_before"
su_sql "SELECT pg_terminate_backend($pid)" >/dev/null
# the terminated transaction is committed: it becomes visible although the
# client was told nothing (a new COMMIT would wait again, so this is that batch)
for ((i = 0; i < 100; i++)); do
        after=$(progressed "$T")
        ((after > before)) && break
        sleep 0.05
done
keys_after=$(sql "SELECT count(*) FROM dedupd.keys")
((after > before)) || round_failed "the terminated COMMIT did not commit (progress $before -> $after)" "$total"
log "ok: the COMMIT whose acknowledgement was lost committed: progress $before -> $after, keys $keys_before -> $keys_after"
restore_syncrep
log "synchronous_standby_names reset"

wait_done "$T" 120
stop d1
grep -q "database unavailable" "$WORK/d1.log" || fail "dedupd did not report the dropped connection"
grep -q "database reconnected" "$WORK/d1.log" || fail "dedupd did not report reconnecting"
grep "database unavailable" "$WORK/d1.log" | head -n 2 | sed "s/^/[$TEST] dedupd: /"
# the batch was redelivered and absorbed: the partitions of the lost batch show
# more consumed records than the topic holds
consumed=$(sql "SELECT sum(consumed) FROM dedupd.offsets WHERE topic = '$T'")
log "records consumed (counted per delivery): $consumed for $total in the topic"
finish_round "$T" "$WORK/keys.txt" 0 "terminated_at=$before"
