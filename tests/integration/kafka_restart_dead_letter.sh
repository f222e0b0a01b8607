#!/usr/bin/env bash
# Kafka: the broker goes away (SIGKILL, then SIGTERM) while dedupd
# dead-letters: a tenth of the topic is unkeyable (not JSON, or no
# order_id), and dedupd stops itself right after it polled a batch (fault
# point after_poll, SIGSTOP), so the broker stops under the batch about to
# produce its dead letters and await their acks, however fast the machine.
# dedupd stays alive, reconnects and finishes: every good order applied once,
# every poison message in the dead-letter topic (once, or again when its
# batch was retried) with its reason, no consumer lag.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/poison_lib.sh"
require_fault_points

T="pay_rdl_$$"
MSGS=4000 ORDERS=3000
export SEED_ACCOUNTS=50 INITIAL_BALANCE=100000 BATCH_MAX=50
topic "$T" 1
write_config "$WORK/c.yaml" "$T"
workload "$WORK/w.txt" "$WORK/keys.txt" "$MSGS" "$ORDERS"
with_poison "$WORK/w.txt" "$WORK/all.txt" "$WORK/poison.txt" 10
total=$(wc -l <"$WORK/all.txt")

# done_alive NAME WHEN: until the database has every record ($WANT, counted
# while the broker was up: just restarted, it may not lead its partition yet),
# failing at once (with ASan's words) when dedupd NAME dies meanwhile
done_alive() {
        local want=$WANT
        poll 240 progressed_or_gone "$1" "$want" || fail "timed out: database progressed $GOT of $want records of $T"
        alive "$1" "$2"
}
progressed_or_gone() { ! kill -0 "${PIDS[$1]}" 2>/dev/null || is_progressed "$T" "$2"; }

# One round per way of stopping the broker, each with a dedupd of its own
# (the fault point fires once a process) and its half of the topic.
round=0
for mode in kill term; do
        round=$((round + 1))
        sed -n "$(((round - 1) * total / 2 + 1)),$((round * total / 2))p" "$WORK/all.txt" | "$KT" produce -t "$T" >/dev/null
        WANT=$(produced "$T")
        DEDUPD_FAULT="after_poll:5:stop" start "d$round" "$WORK/c.yaml"
        wait_self_stopped "d$round" "at its 5th batch"
        "$DEDUPD_SERVICES" kafka-stop "$mode"
        log "broker stopped ($mode) at database position $(progressed "$T"), dedupd about to dead-letter"
        kill -CONT "${PIDS[d$round]}"
        sleep 8 # its dead letters, commits of offsets and fetches fail
        alive "d$round" "while the broker was down ($mode)"
        "$DEDUPD_SERVICES" kafka-start
        done_alive "d$round" "after the broker came back ($mode)"
        stop "d$round"
done

check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" "$ORDERS" "distinct keys recorded"
"$KT" dump -t "$T.dlq" >"$WORK/dlq.txt"
missing=$(grep -vcxFf <(grep -oF -f "$WORK/poison.txt" "$WORK/dlq.txt" | sort -u) "$WORK/poison.txt" || true)
assert_eq "$missing" 0 "poison messages never dead-lettered"
letters=$(grep -c '^  dedupd.reason=key: ' "$WORK/dlq.txt" || true)
((letters >= $(wc -l <"$WORK/poison.txt"))) || fail "only $letters dead letters with a reason for $(wc -l <"$WORK/poison.txt") poison messages"
log "ok: $letters dead letters with their reason for $(wc -l <"$WORK/poison.txt") poison messages"
assert_eq "$(kafka_lag "$T")" 0 "Kafka consumer lag"
