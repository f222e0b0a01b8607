#!/usr/bin/env bash
# Case 5: rebalance storm. Three instances in one group on a 6-partition topic
# while a producer writes in bursts; for the ~15 s of production members keep joining, leaving
# cleanly (SIGTERM, must exit 0) and vanishing (kill -9: the group notices only
# after session.timeout.ms), one action every 0.7-1.6 s, chosen by a seeded
# RANDOM (the iteration number), so a soak explores other storms. Records carry
# distinct Kafka keys, so duplicates of an order sit on different partitions
# and two members claim the same key concurrently.
# shellcheck source=tests/faults/faultlib.sh
. "$(dirname "$0")/../faultlib.sh"

export SEED_ACCOUNTS=50 INITIAL_BALANCE=1000
round rebalance_storm
T="fault_storm_$$"
topic "$T" 6
BATCH_MAX=50 fault_config "$T"
workload "$WORK/w.txt" "$WORK/keys.txt" 12000 8000
spread "$WORK/w.txt" "$WORK/ws.txt"
split -n l/15 "$WORK/ws.txt" "$WORK/chunk."
RANDOM=$((FAULTS_ITER * 7919))
MEMBERS=(a b c)
fl_start a "$CFG"
fl_start b "$CFG"
(for c in "$WORK"/chunk.*; do "$KT" produce -t "$T" <"$c" 2>/dev/null || exit 1; sleep 1; done) &
prod=$!

joins=2 leaves=0 kills=0
# the storm lasts as long as the producer (15 bursts, one a second)
while kill -0 "$prod" 2>/dev/null; do
        sleep "0.$((RANDOM % 10 + 7))"
        up=() down=()
        for m in "${MEMBERS[@]}"; do
                if [[ -n ${PIDS[$m]:-} ]]; then up+=("$m"); else down+=("$m"); fi
        done
        if ((${#down[@]} && (${#up[@]} == 1 || RANDOM % 3 == 0))); then
                m=${down[RANDOM % ${#down[@]}]}
                fl_start "$m" "$CFG"
                joins=$((joins + 1))
                log "storm: $m joins (progress $(progressed "$T"))"
        else
                m=${up[RANDOM % ${#up[@]}]}
                if ((RANDOM % 2)); then
                        stop "$m"
                        leaves=$((leaves + 1))
                        log "storm: $m leaves cleanly (progress $(progressed "$T"))"
                else
                        crash "$m"
                        kills=$((kills + 1))
                        log "storm: $m killed -9 (progress $(progressed "$T"))"
                fi
        fi
done
log "storm over: $joins joins, $leaves clean leaves, $kills kills; members now: ${!PIDS[*]}"
for m in "${MEMBERS[@]}"; do
        [[ -n ${PIDS[$m]:-} ]] || fl_start "$m" "$CFG"
done
wait "$prod" || fail "producer failed"
wait_done "$T" 180
for m in "${MEMBERS[@]}"; do stop "$m"; done
revokes=$(cat "$WORK"/*.log | grep -c 'partitions revoked' || true)
log "rebalances seen (revocations logged by all members): $revokes"
finish_round "$T" "$WORK/keys.txt" 0 "joins=$joins leaves=$leaves kills=$kills"
