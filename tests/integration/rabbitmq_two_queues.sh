#!/usr/bin/env bash
# Two queues in one dedupd, each on its own channel: queue B's batch keeps
# failing (its handler returns RETRY) while queue A drains; basic.ack
# multiple=true on A never covers B's unacknowledged delivery, so after a
# kill -9 B's message is still in B and, once its handler recovers, takes
# effect once. (On one shared channel A's acks would have acknowledged it.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rmq_lib.sh"

A="two_a_$$" B="two_b_$$"
rmq_queue "$B"
rmq_queue "$A"
queue_b() {
        cat <<YAML
  - name: $B
    key: {subject: "{json:id}", action: DO}
    handler:
      path: "$BUILD/tests/flaky.so"
      config: {retry_keys: "$1"}
    retry: {max_attempts: 1000, backoff_ms: 50, backoff_max_ms: 200}
YAML
}
rmq_write_config "$WORK/c1.yaml" "$A" "$(queue_b b1/DO)"
rmq_write_config "$WORK/c2.yaml" "$A" "$(queue_b none)"

echo '{"id":"b1"}' | rmq_publish "$B"
for i in $(seq 1 50); do printf '{"order_id":"two-%d","user_id":6,"amount":1}\n' "$i"; done | rmq_publish "$A"
start d1 "$WORK/c1.yaml"
rmq_wait_empty "$A"
sleep 1
assert_eq "$(rmq_messages "$B")" 1 "B's message still unacknowledged while its batch retries"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 6")" 950 "A drained while B waits (balance of user 6)"
crash d1
assert_eq "$(rmq_messages "$B")" 1 "B's message still in B after kill -9 (A's acks did not cover it)"
start d2 "$WORK/c2.yaml"
rmq_wait_empty "$B"
stop d2
assert_eq "$(sql "SELECT count(*) FROM flaky_effects WHERE idem_key = 'b1/DO'")" 1 "B's effect, once its handler recovered"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key LIKE 'two-%'")" 50 "A's effects, once each"
