#!/usr/bin/env bash
# Case 1: SIGKILL at each step of the pipeline, reached deterministically with
# DEDUPD_FAULT=POINT:N:kill (src/fault.h). One round per point: the workload
# (duplicates, and a malformed message every 50 so that batches dead-letter) is
# produced, dedupd runs until the N-th pass of the point kills it, the death is
# checked (exit status 137 and the log line "fault point POINT reached"; Kafka's
# committed offsets not ahead of the database), dedupd is restarted without the
# fault, finishes, and the invariant is checked. A last round kills at
# after_commit on the batch that holds a partition's tail (see there).
# shellcheck source=tests/faults/faultlib.sh
. "$(dirname "$0")/../faultlib.sh"

POINTS=(after_poll after_dlq after_claim in_handler before_commit after_commit after_ack)
[[ -n ${FAULT_POINTS:-} ]] && read -r -a POINTS <<<"${FAULT_POINTS/after_commit_tail/}"
export SEED_ACCOUNTS=50 INITIAL_BALANCE=1000
MSGS=3000 ORDERS=2000

for idx in "${!POINTS[@]}"; do
        p=${POINTS[$idx]}
        round "$p"
        T="fault_kill_${p}_$$"
        topic "$T" 4
        BATCH_MAX=100 fault_config "$T"
        workload "$WORK/w.txt" "$WORK/keys.txt" "$MSGS" "$ORDERS"
        # a malformed message every 50: most batches of 100 have one to dead-letter
        awk 'NR % 50 == 25 {print "not-json-" NR} {print}' "$WORK/w.txt" >"$WORK/w2.txt"
        bad=$(grep -c '^not-json-' "$WORK/w2.txt")
        spread "$WORK/w2.txt" "$WORK/ws.txt"
        "$KT" produce -t "$T" <"$WORK/ws.txt"
        total=$(produced "$T")
        # about 31 batches of 100: hit 4..15 lands mid-run; --soak moves it
        n=$((4 + (FAULTS_ITER * 5 + idx * 3) % 12))

        fl_start d1 "$CFG" "$p:$n:kill"
        wait_exit d1 90 || round_failed "fault point $p:$n not reached in 90 s (still running)" "$total"
        at_kill=$(progressed "$T")
        grep -q "fault point $p reached: raising SIGKILL" "$WORK/d1.log" ||
                round_failed "no 'fault point $p reached' line in the log (exit $EXIT_RC)" "$total"
        ((EXIT_RC == 137)) || round_failed "dedupd exited $EXIT_RC, not 137 (SIGKILL)" "$total"
        ((at_kill < total)) || round_failed "killed only after the whole topic was committed" "$total"
        ahead=$(kafka_ahead "$T")
        log "ok: SIGKILL at $p hit $n (exit $EXIT_RC); database at $at_kill of $total," \
                "Kafka committed $(kafka_committed "$T"); partitions with Kafka ahead of the database: $ahead"
        mv "$WORK/d1.log" "$WORK/$p-killed.log"

        fl_start d1 "$CFG" # restarted without the fault
        wait_done "$T" 120
        stop d1
        mv "$WORK/d1.log" "$WORK/$p-restarted.log"

        # every malformed message reached the dead-letter topic (at least once:
        # a kill between the dead letter and COMMIT dead-letters it again)
        "$KT" dump -t "$T.dlq" >"$WORK/dlq.txt"
        dl=$(grep -o 'not-json-[0-9]*' "$WORK/dlq.txt" | sort -u | wc -l)
        dl_all=$(grep -c '^  dedupd.reason=' "$WORK/dlq.txt" || true)
        lost=$((bad - dl))
        ((lost == 0)) || log "ANOMALY: $lost of $bad malformed messages never reached $T.dlq"
        log "dead letters: $dl_all for $bad malformed messages ($((dl_all - dl)) repeated after the kill)"
        finish_round "$T" "$WORK/keys.txt" $((ahead + lost)) "hit=$n killed_at=$at_kill dlq_repeats=$((dl_all - dl))"
done

# after_commit once more, on the batch that holds a partition's last records:
# the database is then at the partition's end and Kafka's committed offset
# behind it. The restarted dedupd starts there from the database, has nothing
# to consume — and must still bring Kafka's committed offset to the end by its
# clean stop (lag monitoring reads Kafka's).
if [[ -z ${FAULT_POINTS:-} || " $FAULT_POINTS " == *" after_commit_tail "* ]]; then
        round after_commit_tail
        T="fault_kill_tail_$$"
        topic "$T" 1
        BATCH_MAX=100 fault_config "$T"
        workload "$WORK/w.txt" "$WORK/keys.txt" 60 40
        "$KT" produce -t "$T" <"$WORK/w.txt"
        fl_start d1 "$CFG" "after_commit:1:kill"
        wait_exit d1 60 || round_failed "fault point after_commit:1 not reached in 60 s" 60
        ((EXIT_RC == 137)) || round_failed "dedupd exited $EXIT_RC, not 137 (SIGKILL)" 60
        db=$(progressed "$T")
        kc=$(kafka_committed "$T")
        if ((db == 60 && kc < 60)); then
                log "ok: killed after committing the partition's tail: database at $db, Kafka committed $kc"
        else
                log "note: the first batch did not hold the whole partition (database $db, Kafka $kc)"
        fi
        mv "$WORK/d1.log" "$WORK/after_commit_tail-killed.log"
        fl_start d1 "$CFG"
        wait_done "$T" 60
        # nothing to consume: wait until it holds the partition (after the killed
        # member's session timed out), so that its clean stop can commit it
        for ((i = 0; i < 300; i++)); do
                grep -q "assigned $T/0" "$WORK/d1.log" && break
                sleep 0.1
        done
        grep "assigned $T/0" "$WORK/d1.log" | cut -d' ' -f5- | sed "s/^/[$TEST] restarted: /" ||
                round_failed "the restarted dedupd never got the partition" 60
        sleep 1
        stop d1
        mv "$WORK/d1.log" "$WORK/after_commit_tail-restarted.log"
        finish_round "$T" "$WORK/keys.txt" 0 "database_at_kill=$db kafka_at_kill=$kc"
fi
