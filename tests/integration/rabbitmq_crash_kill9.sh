#!/usr/bin/env bash
# kill -9 at random moments during a 5,000-message RabbitMQ run with
# duplicates, restarted each time. What a killed process had not acked comes
# back redelivered, and only the dedup table stands between a redelivery and a
# second effect (RabbitMQ has no offsets): every distinct key ends with
# exactly one effect or one recorded rejection, nothing missing, nothing doubled.
# The first kills land exactly between COMMIT and basic.ack (a fault point),
# so committed deliveries are sure to come back; the others land anywhere.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rmq_lib.sh"
require_fault_points

Q="pay_crash_$$"
MSGS=5000 ORDERS=3500
export SEED_ACCOUNTS=50 INITIAL_BALANCE=3000 BATCH_MAX=100 PREFETCH=300
rmq_loaded_queue "$Q" "$MSGS" "$ORDERS"

RANDOM=$$
kills=0
while ((kills < 6)); do
        before=$(keys)
        ((before >= ORDERS)) && break
        target=$((before + RANDOM % 700 + 1))
        if ((kills < 3)); then
                DEDUPD_FAULT="after_commit:$((RANDOM % 4 + 2))" start d1 "$WORK/c.yaml"
                wait "${PIDS[d1]}" || true
                unset "PIDS[d1]"
                kills=$((kills + 1))
                log "kill $kills: SIGKILL between COMMIT and ack, $(keys) of $ORDERS keys recorded"
                continue
        fi
        start d1 "$WORK/c.yaml"
        for ((i = 0; i < 300; i++)); do
                (($(keys) >= target)) && break
                sleep 0.05
        done
        sleep "0.0$((RANDOM % 10))"
        crash d1
        kills=$((kills + 1))
        log "kill $kills: SIGKILL with $(keys) of $ORDERS keys recorded, $(rmq_messages "$Q") message(s) not acked"
done
log "$kills kills"
start d1 "$WORK/c.yaml"
rmq_wait_empty "$Q" 180
stop d1

check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" "$ORDERS" "distinct keys recorded"
deliveries=$(sql "SELECT max(next_offset) FROM dedupd.offsets WHERE topic = '$Q'")
counted=$(sql "SELECT sum(applied) + sum(rejected) + sum(duplicates) + sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$Q'")
assert_eq "$counted" "$deliveries" "every committed delivery counted once"
((deliveries > MSGS)) || fail "$deliveries deliveries committed of $MSGS published: the kills after COMMIT should have brought some back"
log "deliveries committed: $deliveries for $MSGS published ($((deliveries - MSGS)) redeliveries absorbed); effects: $(sql "SELECT count(*) FROM transfer_ledger"), rejections: $(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'FAILED'")"
