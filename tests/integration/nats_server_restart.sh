#!/usr/bin/env bash
# NATS JetStream: the server stopped and started again mid-run (twice: once
# cleanly, once with SIGKILL). dedupd keeps running, reconnects, and finishes:
# every key one effect or one rejection, nothing missing, nothing doubled,
# nothing left unacknowledged; messages published after the restart arrive too.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"

export SEED_ACCOUNTS=50 INITIAL_BALANCE=3000 BATCH_MAX=50
nats_stream
write_nats_config "$WORK/c.yaml"
workload "$WORK/w.txt" "$WORK/keys.txt" 8000 6000
head -n 6000 "$WORK/w.txt" | publish
start d1 "$WORK/c.yaml"

target=1000
for mode in term kill; do
        for ((i = 0; i < 3000; i++)); do
                (($(progressed "$SUBJ") > target)) && break
                sleep 0.01
        done
        (($(progressed "$SUBJ") > target)) || fail "no progress past $target before stopping the server ($mode)"
        "$DEDUPD_SERVICES" nats-stop "$mode"
        log "nats-server stopped ($mode) at database position $(progressed "$SUBJ")"
        sleep 2
        kill -0 "${PIDS[d1]}" 2>/dev/null || fail "dedupd exited while the server was down"
        "$DEDUPD_SERVICES" nats-start
        target=$(($(progressed "$SUBJ") + 300)) # the next stop after progress on the restarted server
done
tail -n +6001 "$WORK/w.txt" | publish
assert_eq "$(last_seq)" 8000 "messages in the stream"
nats_done 180
stop d1

check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" 6000 "distinct keys recorded"
assert_eq "$(consumer_field ack_pending)" 0 "messages left unacknowledged"
grep -q "disconnected from nats://127.0.0.1" "$WORK/d1.log" || fail "dedupd did not say it lost the server"
grep -q "reconnected to nats://127.0.0.1" "$WORK/d1.log" || fail "dedupd did not say it reconnected"
