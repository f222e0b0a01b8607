#!/usr/bin/env bash
# A RabbitMQ config through the tools and the startup checks: dedupctl check
# (and --print, which hides the URL), verify (no Kafka lag, queue depth
# instead), replay refused, a missing queue or dead-letter exchange refused at
# startup with its name, a bad URL or a stray kafka: section refused as config.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rmq_lib.sh"

Q="cli_$$"
rmq_queue "$Q"
rmq_write_config "$WORK/c.yaml" "$Q"

out=$("$DEDUPCTL" check -c "$WORK/c.yaml" 2>&1) || fail "dedupctl check exited $?: $out"
grep -q "RabbitMQ: every queue exists" <<<"$out" || fail "check: no queue line: $out"
grep -q "warning: rabbitmq.dead_letter.exchange is not set" <<<"$out" || fail "check: no dead-letter warning: $out"
grep -q "warning: database .*: the server reports no synchronous standby (synchronous_standby_names is empty): a failover to a standby that had not received the last commits loses those messages' effects" <<<"$out" ||
        fail "check: no warning that a failover can lose acknowledged commits: $out"
log "ok: dedupctl check passes, warns that dead letters go to the queue's own exchange and that no synchronous standby is reported"

out=$("$DEDUPCTL" check --print -c "$WORK/c.yaml" 2>&1) || fail "dedupctl check --print exited $?"
grep -qx "rabbitmq.url: (set, not shown)" <<<"$out" || fail "check --print does not hide the URL: $(grep rabbitmq.url <<<"$out")"
grep -qx "source: rabbitmq" <<<"$out" || fail "check --print: no source line"
if grep -q "guest" <<<"$out"; then fail "check --print shows the URL's credentials"; fi
log "ok: check --print shows rabbitmq.url as (set, not shown)"

"$DEDUPCTL" migrate -c "$WORK/c.yaml" >/dev/null || fail "dedupctl migrate failed"
echo '{"order_id":"c1","user_id":1,"amount":10}' | rmq_publish "$Q"
out=$("$DEDUPCTL" verify --expect-caught-up -c "$WORK/c.yaml" 2>&1) && fail "verify --expect-caught-up passed with a message ready: $out"
grep -q "lag: queue $Q is not caught up: 1 message(s) ready" <<<"$out" || fail "verify: no queue depth finding: $out"
start d1 "$WORK/c.yaml"
rmq_wait_empty "$Q"
stop d1
grep -q "the server reports no synchronous standby" "$WORK/d1.log" || fail "dedupd did not warn at start-up that no synchronous standby is reported"
out=$("$DEDUPCTL" verify --expect-caught-up -c "$WORK/c.yaml" 2>&1) || fail "verify exited $? on a drained queue: $out"
grep -q "lag: not measured (source: rabbitmq has no offsets)" <<<"$out" || fail "verify: no note about the lag: $out"
log "ok: verify skips the Kafka lag, counts the queue's ready messages instead"

rc=0
"$DEDUPCTL" replay -c "$WORK/c.yaml" --topic "$Q" --to-time 2020-01-01T00:00:00Z >"$WORK/replay.out" 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupctl replay exit code on RabbitMQ"
grep -q "source rabbitmq has no offsets to move back" "$WORK/replay.out" || fail "replay: $(cat "$WORK/replay.out")"

rmq_write_config "$WORK/missing.yaml" "no_such_queue_$$"
rc=0
timeout 60 "$DEDUPD" -c "$WORK/missing.yaml" >"$WORK/missing.log" 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupd exit code with a missing queue"
grep -q "queue 'no_such_queue_$$' does not exist" "$WORK/missing.log" || fail "no error naming the queue: $(tail -3 "$WORK/missing.log")"

rmq_write_config "$WORK/nodlx.yaml" "$Q" "" "  dead_letter:
    exchange: no_such_exchange_$$"
rc=0
timeout 60 "$DEDUPD" -c "$WORK/nodlx.yaml" >"$WORK/nodlx.log" 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupd exit code with a missing dead-letter exchange"
grep -q "rabbitmq.dead_letter.exchange 'no_such_exchange_$$' does not exist" "$WORK/nodlx.log" || fail "no error naming the exchange"

sed 's#url: .*#url: "http://nowhere"#' "$WORK/c.yaml" >"$WORK/badurl.yaml"
rc=0
"$DEDUPD" -c "$WORK/badurl.yaml" >"$WORK/badurl.log" 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupd exit code with a bad URL"
grep -q "badurl.yaml:[0-9]*:[0-9]*: rabbitmq.url: not an AMQP URL" "$WORK/badurl.log" || fail "bad URL: $(cat "$WORK/badurl.log")"

{ cat "$WORK/c.yaml"; printf 'kafka:\n  bootstrap.servers: "x:1"\n'; } >"$WORK/both.yaml"
rc=0
"$DEDUPD" -c "$WORK/both.yaml" >"$WORK/both.log" 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupd exit code with a kafka: section under source: rabbitmq"
grep -q "kafka: is used only with source: kafka (this config consumes RabbitMQ)" "$WORK/both.log" || fail "stray kafka: $(cat "$WORK/both.log")"

# The queue deleted under a running dedupd: the broker cancels the consumer,
# the reconnection finds no queue, and dedupd stops (exit 1) naming it.
start d2 "$WORK/c.yaml"
for ((i = 0; i < 100; i++)); do grep -q "consuming 1 queue" "$WORK/d2.log" && break; sleep 0.1; done
rmqctl delete_queue "$Q" >/dev/null
for ((i = 0; i < 100; i++)); do kill -0 "${PIDS[d2]}" 2>/dev/null || break; sleep 0.1; done
rc=0
wait "${PIDS[d2]}" || rc=$?
unset "PIDS[d2]"
assert_eq "$rc" 1 "dedupd exit code once its queue is deleted"
grep -q "queue $Q does not exist (any more)" "$WORK/d2.log" || fail "no error naming the deleted queue"
