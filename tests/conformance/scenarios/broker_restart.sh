#!/usr/bin/env bash
# The broker stopped and started again in the middle of a run, twice: once
# cleanly (term), once with SIGKILL. dedupd keeps running, says the broker
# went away, reconnects, and finishes: every key one effect or one
# rejection, nothing missing, nothing doubled, nothing left unacknowledged;
# messages produced after the restarts arrive too. It stops the broker every
# test shares: it runs alone (ctest label exclusive, DEDUPD_TEST_EXCLUSIVE=1).
. "$(dirname "$0")/../lib.sh"
require_fault_points

MSGS=8000 ORDERS=5000
# Small batches; dedupd stops itself (SIGSTOP) after its 50th COMMIT, before
# that batch's acknowledgement, so the broker goes away under a run that is
# provably not over, however fast the machine.
export SEED_ACCOUNTS=50 INITIAL_BALANCE=100000 BATCH_MAX=20 PREFETCH=20
b_setup pay_restart 4
b_config "$WORK/c.yaml"
workload "$WORK/w.txt" "$WORK/keys.txt" "$MSGS" "$ORDERS"
head -n 6000 "$WORK/w.txt" | b_produce

DEDUPD_FAULT="after_commit:50:stop" start d1 "$WORK/c.yaml"
wait_stopped d1
for mode in term kill; do
        before=$(recorded_keys)
        b_broker_stop "$mode"
        kill -CONT "${PIDS[d1]}"
        sleep 2
        during=$(recorded_keys)
        ((during < ORDERS)) || fail "the run was over ($during keys) while the broker was down"
        kill -0 "${PIDS[d1]}" 2>/dev/null || fail "dedupd died while the broker was down ($mode)"
        log "broker stopped ($mode) with $before keys recorded, $during of $ORDERS while it was down"
        b_broker_start
        [[ $mode == term ]] || break
        # Progress on the restarted broker, then dedupd stopped again holding
        # what it fetched, so the second stop too is under a run not over.
        # (Kafka may have committed what it had fetched while the broker was
        # down: at most up to the 6,000 produced so far)
        want=$(($(b_committed) + 200))
        ((want < 6000)) || want=5999
        poll 120 committed_past "$want" || fail "no progress past $want messages after the broker came back ($mode)"
        kill -STOP "${PIDS[d1]}"
done
# The rest produced once the broker is back (not before a SIGKILL: a broker
# killed may lose what a producer sent without waiting for its confirmation)
tail -n +6001 "$WORK/w.txt" | b_produce
assert_eq "$(b_count)" "$MSGS" "messages produced"
b_wait_done 240
stop d1

b_check_reconnected d1
check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" "$ORDERS" "distinct keys recorded"
b_check_acked
counted=$(counted)
((counted >= MSGS)) || fail "only $counted deliveries committed of $MSGS produced"
log "deliveries committed: $counted for $MSGS produced ($((counted - MSGS)) delivered again and absorbed)"
