#!/usr/bin/env bash
# The RabbitMQ broker stopped and started again in the middle of a run:
# dedupd says the connection is lost, drops what it had buffered (never
# acknowledged), reconnects when the broker is back, and the redeliveries
# are absorbed: nothing lost, nothing doubled, the queue empty at the end.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rmq_lib.sh"

Q="pay_restart_$$"
MSGS=20000 ORDERS=8000
# Small batches; dedupd stops itself (SIGSTOP) after its 50th COMMIT, before
# that batch's acknowledgement, so the broker goes away under a run that is
# provably not over, however fast the machine.
export SEED_ACCOUNTS=50 INITIAL_BALANCE=100000 BATCH_MAX=20 PREFETCH=20
rmq_loaded_queue "$Q" "$MSGS" "$ORDERS"

DEDUPD_FAULT="after_commit:50:stop" start d1 "$WORK/c.yaml"
for ((i = 0; i < 600; i++)); do
        [[ $(ps -o stat= -p "${PIDS[d1]}" 2>/dev/null) == T* ]] && break
        sleep 0.05
done
[[ $(ps -o stat= -p "${PIDS[d1]}") == T* ]] || fail "dedupd did not stop itself after its 50th commit"
before=$(keys)
"$DEDUPD_SERVICES" rabbitmq-stop term
kill -CONT "${PIDS[d1]}"
sleep 2
during=$(keys)
((during < ORDERS)) || fail "the run was over ($during keys) while the broker was down"
log "broker stopped with $before keys recorded, $during of $ORDERS while it was down"
kill -0 "${PIDS[d1]}" || fail "dedupd died while the broker was down"
"$DEDUPD_SERVICES" rabbitmq-start
rmq_wait_empty "$Q" 240
stop d1

grep -q "\[rabbitmq\] connection to amqp://127.0.0.1:.* lost: " "$WORK/d1.log" || fail "no 'connection lost' line"
grep -q "\[rabbitmq\] reconnected to amqp://127.0.0.1:" "$WORK/d1.log" || fail "no 'reconnected' line"
log "ok: the log says the connection was lost and came back"
check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" "$ORDERS" "distinct keys recorded"
deliveries=$(sql "SELECT max(next_offset) FROM dedupd.offsets WHERE topic = '$Q'")
((deliveries >= MSGS)) || fail "only $deliveries deliveries committed of $MSGS published"
log "deliveries committed: $deliveries for $MSGS published ($((deliveries - MSGS)) redeliveries absorbed)"
