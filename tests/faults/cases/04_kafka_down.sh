#!/usr/bin/env bash
# Case 4: the Kafka broker stopped mid-run and restarted — once with SIGTERM
# (controlled shutdown: `scripts/services kafka-stop term`) and once with
# SIGKILL (`kafka-stop kill`: log recovery at restart). dedupd must survive the
# outage (it may keep committing already-fetched batches to the database; their
# Kafka offset commits fail, and dead letters — a malformed record every 100 —
# cannot be written), rejoin its group, and finish with the invariant
# and Kafka's committed offsets at the end of the topic after a clean stop.
# shellcheck source=tests/faults/faultlib.sh
. "$(dirname "$0")/../faultlib.sh"

export SEED_ACCOUNTS=50 INITIAL_BALANCE=1000
MODES=(term kill)
[[ -n ${KAFKA_STOP_MODES:-} ]] && read -r -a MODES <<<"$KAFKA_STOP_MODES"
for mode in "${MODES[@]}"; do
        round "kafka_$mode"
        T="fault_kafka_${mode}_$$"
        topic "$T" 4
        BATCH_MAX=100 fault_config "$T"
        workload "$WORK/w.txt" "$WORK/keys.txt" 6000 4000
        # malformed records too: dead-lettering needs the broker that is down
        awk 'NR % 100 == 50 {print "not-json-" NR} {print}' "$WORK/w.txt" >"$WORK/w2.txt"
        bad=$(grep -c '^not-json-' "$WORK/w2.txt")
        spread "$WORK/w2.txt" "$WORK/ws.txt"
        head -n 3600 "$WORK/ws.txt" >"$WORK/part1.txt"
        tail -n +3601 "$WORK/ws.txt" >"$WORK/part2.txt"
        fl_start d1 "$CFG"
        "$KT" produce -t "$T" <"$WORK/part1.txt"
        wait_progress "$T" 600 60 || round_failed "dedupd made no progress"

        at_stop=$(progressed "$T")
        "$DEDUPD_SERVICES" kafka-stop "$mode"
        down_at=$SECONDS
        at_down=$(progressed "$T")
        sleep 8 # beyond session.timeout.ms (6 s)
        kill -0 "${PIDS[d1]}" 2>/dev/null || round_failed "dedupd died while Kafka was down"
        log "Kafka stopping ($mode) at $at_stop of 3600 records, down at $at_down;" \
                "$(progressed "$T") after 8 s down"
        "$DEDUPD_SERVICES" kafka-start
        log "Kafka back after $((SECONDS - down_at)) s"
        ahead=$(kafka_ahead "$T")
        "$KT" produce -t "$T" <"$WORK/part2.txt"
        wait_done "$T" 150
        stop d1
        mv "$WORK/d1.log" "$WORK/kafka_$mode.log"
        "$KT" dump -t "$T.dlq" >"$WORK/dlq.txt"
        dl=$(grep -o 'not-json-[0-9]*' "$WORK/dlq.txt" | sort -u | wc -l)
        dl_all=$(grep -c '^  dedupd.reason=' "$WORK/dlq.txt" || true)
        lost=$((bad - dl))
        ((lost == 0)) || log "ANOMALY: $lost of $bad malformed records never reached $T.dlq"
        log "dead letters: $dl_all for $bad malformed records"
        finish_round "$T" "$WORK/keys.txt" $((ahead + lost)) "mode=$mode dlq_repeats=$((dl_all - dl))"
done
