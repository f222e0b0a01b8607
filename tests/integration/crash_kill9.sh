#!/usr/bin/env bash
# kill -9 at random moments during a 10,000-message run with duplicates,
# restarted each time: every distinct key ends with exactly one effect or one
# recorded rejection, nothing missing, nothing doubled.
. "$(dirname "$0")/lib.sh"

T="pay_crash_$$"
export SEED_ACCOUNTS=50 INITIAL_BALANCE=3000
topic "$T" 4
write_config "$WORK/c.yaml" "$T"
workload "$WORK/w.txt" "$WORK/keys.txt" 10000 7000
"$KT" produce -t "$T" <"$WORK/w.txt"
assert_eq "$(produced "$T")" 10000 "messages produced"

RANDOM=$$
kills=0
# Each round: let it progress a random amount past the last crash, then kill -9
# (so kills land mid-batch, mid-handler, mid-commit, wherever the process is).
while ((kills < 8)); do
        before=$(progressed "$T")
        ((before >= 10000)) && break
        target=$((before + RANDOM % 1200 + 1))
        start d1 "$WORK/c.yaml"
        for ((i = 0; i < 300; i++)); do
                (($(progressed "$T") >= target)) && break
                sleep 0.05
        done
        sleep "0.0$((RANDOM % 10))"
        crash d1
        kills=$((kills + 1))
        log "kill $kills: SIGKILL after $(progressed "$T") of 10000 records committed"
done
log "$kills kills"
start d1 "$WORK/c.yaml"
wait_done "$T" 180
stop d1

check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" 7000 "distinct keys recorded"
assert_eq "$(kafka_lag "$T")" 0 "Kafka consumer lag"
log "effects: $(sql "SELECT count(*) FROM transfer_ledger"), rejections: $(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'FAILED'")"
