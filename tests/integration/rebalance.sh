#!/usr/bin/env bash
# Two instances in one group, members joining and leaving mid-run: the same
# guarantee as a single instance.
. "$(dirname "$0")/lib.sh"

T="pay_rebalance_$$"
export SEED_ACCOUNTS=50 INITIAL_BALANCE=3000
topic "$T" 6
BATCH_MAX=100 write_config "$WORK/c.yaml" "$T"
workload "$WORK/w.txt" "$WORK/keys.txt" 10000 7000

start a "$WORK/c.yaml"
"$KT" produce -t "$T" <"$WORK/w.txt" &
prod=$!
sleep 2
start b "$WORK/c.yaml"         # join: rebalance
sleep 3
stop a                          # leave cleanly: rebalance
start a "$WORK/c.yaml"          # join again
sleep 2
crash b                         # vanish: rebalance after the session timeout
wait "$prod" || fail "producer failed"
wait_done "$T" 180
stop a

check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" 7000 "distinct keys recorded"
grep -q "revoked" "$WORK/a.log" || fail "no rebalance happened in instance a"
log "rebalances seen by a: $(grep -c 'partitions revoked' "$WORK/a.log")"
