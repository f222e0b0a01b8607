#!/usr/bin/env bash
# NATS JetStream: the server goes away (SIGKILL, then SIGTERM) while dedupd
# dead-letters: a tenth of the stream is unkeyable (not JSON, or no
# order_id), nats.dead_letter.subject is set, and dedupd stops itself right
# after it polled a batch (fault point after_poll, SIGSTOP), so the server
# stops under the batch about to publish its dead letters and await their
# PubAcks, however fast the machine. dedupd stays alive, reconnects and
# finishes: every good order applied once, every poison message on the
# dead-letter subject (once, or again when its batch was retried) with its
# reason, nothing left unacknowledged.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"
. "$(dirname "$0")/poison_lib.sh"
require_fault_points

MSGS=6000 ORDERS=4000
export SEED_ACCOUNTS=50 INITIAL_BALANCE=100000 BATCH_MAX=50
nats_stream
workload "$WORK/w.txt" "$WORK/keys.txt" "$MSGS" "$ORDERS"
with_poison "$WORK/w.txt" "$WORK/all.txt" "$WORK/poison.txt" 10
total=$(wc -l <"$WORK/all.txt")

# done_alive NAME WHEN: nats_done, but failing at once (with ASan's words) when dedupd NAME dies meanwhile
done_alive() {
        local want=$(($(last_seq) + 1))
        INFLIGHT=?
        poll 240 settled_or_gone "$1" "$want" || fail "timed out: the database is at $GOT, the subject's next sequence is $want, $INFLIGHT unacknowledged"
        alive "$1" "$2"
}
settled_or_gone() { ! kill -0 "${PIDS[$1]}" 2>/dev/null || nats_settled "$2"; }

# Four rounds, one for each way of stopping the server (SIGKILL, SIGTERM)
# with one worker and with two, each with a dedupd of its own (the fault
# point fires once a process) and its quarter of the stream. With two
# workers the loop goes on fetching while a worker awaits its PubAcks: the
# pull requests sent while the server is away are answered all at once when
# it is back (nats.c 3.4's Fetch overflowed its array there: src/source/nats/pull.c).
round=0
for mode in kill term; do
        for workers in 1 2; do
                round=$((round + 1))
                sed -n "$(((round - 1) * total / 4 + 1)),$((round * total / 4))p" "$WORK/all.txt" | publish
                WORKERS=$workers write_nats_config "$WORK/c$round.yaml" "  dead_letter: {subject: $DLQ_SUBJ}"
                DEDUPD_FAULT="after_poll:5:stop" start "d$round" "$WORK/c$round.yaml"
                wait_self_stopped "d$round" "at its 5th batch"
                "$DEDUPD_SERVICES" nats-stop "$mode"
                log "nats-server stopped ($mode, workers $workers) at database position $(progressed "$SUBJ"), dedupd about to dead-letter"
                kill -CONT "${PIDS[d$round]}"
                sleep 8 # longer than a PubAck is awaited (5 s): its dead-letter publishes fail, its fetches and acks too
                alive "d$round" "while the server was down ($mode, workers $workers)"
                "$DEDUPD_SERVICES" nats-start
                done_alive "d$round" "after the server came back ($mode, workers $workers)"
                stop "d$round"
                grep -q "disconnected from nats://127.0.0.1" "$WORK/d$round.log" || fail "d$round did not say it lost the server"
                grep -q "reconnected to nats://127.0.0.1" "$WORK/d$round.log" || fail "d$round did not say it reconnected"
                grep -q "batch of [0-9]* not finished: publishing to $DLQ_SUBJ: " "$WORK/d$round.log" ||
                        fail "d$round: no dead-letter publish failed while the server was away"
        done
done

assert_eq "$("$NT" dump "$STREAM" "$SUBJ" | wc -l)" "$total" "messages on $SUBJ"
check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" "$ORDERS" "distinct keys recorded"
assert_eq "$(consumer_field ack_pending)" 0 "messages left unacknowledged"
"$NT" dump "$STREAM" "$DLQ_SUBJ" >"$WORK/dlq.txt"
cut -f3 "$WORK/dlq.txt" >"$WORK/letters.txt"
dead_letters_cover "$WORK/poison.txt" "$WORK/letters.txt"
without=$(grep -vcP '(^|\t|;)dedupd.reason=[^;\t]+' "$WORK/dlq.txt" || true)
assert_eq "$without" 0 "dead letters without a dedupd.reason header"
grep -qP 'dedupd.reason=key: [^;\t]*order_id' "$WORK/dlq.txt" || fail "no reason names the missing order_id"
counted=$(sql "SELECT sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$SUBJ'")
((counted >= $(wc -l <"$WORK/poison.txt"))) || fail "only $counted dead letters counted for $(wc -l <"$WORK/poison.txt") poison messages"
log "ok: $counted dead letters counted"
