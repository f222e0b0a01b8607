#!/usr/bin/env bash
# Kafka: a zombie's batch start is not a crash. Instance A takes the topic's
# only partition, counts its first batch's start in the crash-loop ledger and
# stops right there (fault point after_poll, SIGSTOP: a zombie whose process
# and database session live on). After the session timeout the group hands
# the partition to instance B, which starts at the database's position: the
# offset where A's counted start begins. A is alive, so B must not take that
# start for a crash (no message run one at a time, nothing dead-lettered); B
# says whose batch it met. The topic drains with every key one effect or one
# rejection.
. "$(dirname "$0")/lib.sh"
require_fault_points

T="zombie_guard_$$"
export SEED_ACCOUNTS=50 INITIAL_BALANCE=3000
topic "$T" 1
write_config "$WORK/c.yaml" "$T"
workload "$WORK/w.txt" "$WORK/keys.txt" 600 400
"$KT" produce -t "$T" <"$WORK/w.txt"

DEDUPD_FAULT="after_poll:1:stop" start a "$WORK/c.yaml"
for ((i = 0; i < 300; i++)); do
        [[ $(ps -o stat= -p "${PIDS[a]}" 2>/dev/null) == T* ]] && break
        sleep 0.1
done
[[ $(ps -o stat= -p "${PIDS[a]}") == T* ]] || fail "A did not stop at after_poll"
OWNER_A=$(sql "SELECT owner FROM dedupd.attempts WHERE topic = '$T'" 2>/dev/null || echo "(no owner column)")
assert_eq "$(sql "SELECT \"offset\" || '..' || (until_offset > 0) FROM dedupd.attempts WHERE topic = '$T'")" "0..true" \
        "A's start in the ledger (from offset 0)"

start b "$WORK/c.yaml"
wait_done "$T" 120
if grep -h "one message at a time\|crash loop" "$WORK/b.log"; then
        fail "B took the zombie's batch for a crash"
fi
grep -q "offset 0 is in a batch that live instance $OWNER_A has in flight: not a crash" "$WORK/b.log" ||
        fail "B did not meet A's batch as a live instance's"
grep "live instance" "$WORK/b.log" | sed 's/^/    /'
crash a
stop b

check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$T'")" 0 "dead-lettered"
assert_eq "$(sql "SELECT count(*) FROM dedupd.attempts WHERE topic = '$T' AND owner <> '$OWNER_A'")" 0 "B's ledger rows left"
log "ok: the zombie's start was a live instance's, not a crash"
