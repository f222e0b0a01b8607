#!/usr/bin/env bash
# Never stall after a failure plus a rebalance. Two members share a group;
# while one of them waits — its batch failed (handler RETRY) and is in
# backoff — a member joins. Before the fix the new partitions' fetch state
# came from a global "paused" and they were never resumed: alive and silent,
# with lag. Now every assigned partition is either fetching or waiting on
# something that ends, so the topic drains to lag 0 and `dedupctl verify
# --expect-caught-up` exits 0. (The same with the database down instead of
# the backoff: liveness_rebalance.)
. "$(dirname "$0")/lib.sh"

T2="live_retry_$$"
topic "$T2" 4
cat >"$WORK/f.yaml" <<YAML
namespace: it-$ID-f
postgres: {conninfo: "$TEST_DSN", retry_max_ms: 1000}
kafka:
  bootstrap.servers: "$KAFKA_BOOTSTRAP"
  group.id: "grp-$ID-f"
  session.timeout.ms: "6000"
  heartbeat.interval.ms: "500"
topics:
  - name: $T2
    key: {subject: "{json:order_id}", action: PAY}
    handler:
      path: "$BUILD/tests/flaky.so"
      config: {retry_keys: k-1/PAY}
    batch: {max_messages: 50, max_wait_ms: 20}
    retry: {max_attempts: 4, backoff_ms: 2000, backoff_max_ms: 4000}
YAML
for i in $(seq 1 1200); do printf 'm%d\t{"order_id":"k-%d"}\n' "$i" $(((i - 1) % 800 + 1)); done >"$WORK/f.txt"
start fa "$WORK/f.yaml"
wait_assigned fa "$T2"
"$KT" produce -t "$T2" <"$WORK/f.txt"
for ((i = 0; i < 200; i++)); do grep -q "k-1/PAY" "$WORK/fa.log" && break; sleep 0.1; done
grep -q "retrying in" "$WORK/fa.log" || fail "the batch holding k-1 never failed"
start fb "$WORK/f.yaml" # joins while fa's batch is in backoff
wait_assigned fb "$T2"
log "fb joined while fa's failed batch waited"
want=$(produced "$T2")
for ((i = 0; i < 900; i++)); do
        got=$(sql "SELECT coalesce(sum(next_offset),0) FROM dedupd.offsets WHERE topic = '$T2'")
        [[ $got == "$want" ]] && break
        sleep 0.1
done
[[ $got == "$want" ]] || fail "stalled: the database progressed $got of $want records of $T2"
stop fa
stop fb
assert_eq "$(sql "SELECT count(DISTINCT idem_key) FROM flaky_effects")" 799 "orders applied (all but k-1)"
assert_eq "$(sql "SELECT count(*) FROM (SELECT idem_key FROM flaky_effects GROUP BY 1 HAVING count(*) > 1) d")" 0 "orders applied twice"
"$KT" dump -t "$T2.dlq" >"$WORK/dlq.txt"
# k-1 is produced twice (records 1 and 801): each delivery spends its own budget
assert_eq "$(grep -c 'dedupd.reason=handler returned RETRY 4 times' "$WORK/dlq.txt")" 2 "deliveries of k-1 dead-lettered after their retry budget"
assert_eq "$("$KT" offsets -t "$T2" -g "grp-$ID-f" | awk '$1=="total"{print $4}')" 0 "Kafka lag after the failed batch and the rebalance"
verify_caught_up "$WORK/f.yaml"
