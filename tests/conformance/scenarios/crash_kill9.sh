#!/usr/bin/env bash
# kill -9 between COMMIT and the acknowledgement, then at random moments,
# during a 6,000-message run with duplicates, restarted each time: every
# distinct key ends with exactly one effect or one recorded rejection,
# nothing missing, nothing doubled, every delivery counted once, nothing left
# unacknowledged. Where the broker delivers again what was committed but not
# acknowledged (B_REDELIVERS_COMMITTED), it comes back and is absorbed.
. "$(dirname "$0")/../lib.sh"
require_fault_points

MSGS=6000 ORDERS=4200
export SEED_ACCOUNTS=50 INITIAL_BALANCE=3000 BATCH_MAX=100 PREFETCH=300
b_setup pay_crash 4
b_config "$WORK/c.yaml"
workload "$WORK/w.txt" "$WORK/keys.txt" "$MSGS" "$ORDERS"
b_produce <"$WORK/w.txt"
assert_eq "$(b_count)" "$MSGS" "messages produced"

# First the worst moment: the third batch committed, the process killed
# before its acknowledgement left. The batches are full (100 each; one that
# closes when nothing more came may hold fewer on a busy machine).
sed 's/^      max_wait_ms: 20$/      max_wait_ms: 5000\n      adaptive: false/' "$WORK/c.yaml" >"$WORK/full.yaml"
grep -q "adaptive: false" "$WORK/full.yaml" || fail "config not as expected: $(cat "$WORK/full.yaml")"
DEDUPD_FAULT=after_commit:3 start d1 "$WORK/full.yaml"
wait_exit d1
assert_eq "$RC" 137 "dedupd's exit at its third COMMIT"
# Alone, the kill comes with the third COMMIT; with partition workers each
# other worker may commit one batch of its own before the third COMMIT's fault
# point fires (the count is across workers): 300, or up to 100 more per worker.
committed=$(b_committed) most=$((300 + 100 * (${WORKERS:-1} - 1)))
((committed >= 300 && committed <= most && committed % 100 == 0)) ||
        fail "messages committed at the kill: $committed, expected 300$( ((most > 300)) && echo " to $most (workers: $WORKERS)")"
log "ok: messages committed at the kill = $committed"
acked=$(b_acked)
((acked <= committed - 100)) || fail "$acked messages acknowledged: the last committed batch's acknowledgement left before the kill"
log "ok: $acked messages acknowledged at the kill (the third batch never was)"

RANDOM=$$
kills=1
while ((kills < 7)); do
        before=$(recorded_keys)
        ((before >= ORDERS)) && break
        if ((kills < 3)); then
                DEDUPD_FAULT="after_commit:$((RANDOM % 4 + 2))" start d1 "$WORK/c.yaml"
                wait_exit d1
                kills=$((kills + 1))
                log "kill $kills: SIGKILL between COMMIT and the acknowledgement, $(recorded_keys) of $ORDERS keys recorded"
                continue
        fi
        target=$((before + RANDOM % 700 + 1))
        start d1 "$WORK/c.yaml"
        for ((i = 0; i < 300; i++)); do
                (($(recorded_keys) >= target)) && break
                sleep 0.05
        done
        sleep "0.0$((RANDOM % 10))"
        crash d1
        kills=$((kills + 1))
        log "kill $kills: SIGKILL with $(recorded_keys) of $ORDERS keys recorded, $(b_acked) of $MSGS acknowledged"
done
log "$kills kills"
# The last run in a log of its own, and stopped only once it consumes: when
# the kills left the database done, waiting for it would end at once, and a
# member stopped before it joined has nothing to acknowledge the database's
# position with (the broker would keep what the last kill left unacknowledged).
started() { (b_check_started "$1") >/dev/null 2>&1; }
start d2 "$WORK/c.yaml"
poll 30 started d2 || fail "the last dedupd never said it consumes: $(tail -n 5 "$WORK/d2.log")"
b_wait_done 180
stop d2

check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" "$ORDERS" "distinct keys recorded"
b_check_acked
if [[ -n $B_RESUME_LINE ]]; then
        grep -qE "$B_RESUME_LINE" "$WORK/d1.log" "$WORK/d2.log" || fail "no restart said it resumed from the database's position ($B_RESUME_LINE)"
        log "ok: a restart resumed from the database's position"
fi
counted=$(counted)
if [[ $B_REDELIVERS_COMMITTED == yes ]]; then
        ((counted > MSGS)) || fail "$counted deliveries committed of $MSGS produced: what the kills after COMMIT left unacknowledged should have come back"
        log "ok: $counted deliveries committed for $MSGS produced ($((counted - MSGS)) delivered again and absorbed)"
else
        assert_eq "$counted" "$MSGS" "deliveries committed (the restarts resumed from the database's position)"
fi
assert_eq "$(sql "SELECT sum(duplicates) FROM dedupd.offsets WHERE topic = '$NAME_B'")" "$((counted - ORDERS))" "duplicates absorbed (the workload's and what came back)"
log "effects: $(sql "SELECT count(*) FROM transfer_ledger"), rejections: $(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'FAILED'")"
