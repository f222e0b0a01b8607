#!/usr/bin/env bash
# The retention floor on NATS and RabbitMQ, as on Kafka: a retention class
# that keeps keys shorter than the broker keeps messages is refused by
# dedupctl check (exit 1) and dedupd (exit 2) with the numbers, unless
# allow_shorter_than_topic; a stream or queue that keeps messages for ever
# refuses any keep; a keep as long as the broker's passes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"

# class KEEP [MORE_YAML]: the topic's retention class 'notify', as the topic's extra YAML
class() {
        printf '    retention: notify\nretention_classes:\n  notify:\n    keep: %s\n    max_retry: 1m\n%s' "$1" "${2:-}"
}

# refused NAME FILE PHRASE: check exits 1 and dedupd 2, both saying PHRASE
refused() {
        local rc=0
        "$DEDUPCTL" check -c "$2" >"$WORK/$1.out" 2>&1 || rc=$?
        assert_eq "$rc" 1 "check ($1) exits"
        grep -qF -- "$3" "$WORK/$1.out" || fail "check ($1) does not say: $3: $(cat "$WORK/$1.out")"
        rc=0
        timeout 60 "$DEDUPD" -c "$2" >"$WORK/$1.log" 2>&1 || rc=$?
        assert_eq "$rc" 2 "dedupd ($1) exits"
        grep -qF -- "$3" "$WORK/$1.log" || fail "dedupd ($1) does not say: $3: $(tail -n 3 "$WORK/$1.log")"
}

# passes NAME FILE: check exits 0
passes() {
        "$DEDUPCTL" check -c "$2" >"$WORK/$1.out" 2>&1 || fail "check ($1) exited $?: $(cat "$WORK/$1.out")"
}

# ---- NATS: the stream's max_age
nats_stream
"$NT" maxage "$STREAM" 3600
write_nats_config "$WORK/n_short.yaml" "" "$(class 30m)"
refused n_short "$WORK/n_short.yaml" \
        "stream $STREAM: retention class 'notify' keeps keys 30m but the stream retains messages for 1h (max_age 1h): a message still in the stream could be replayed after its key was purged — 30m too short; set keep >= 1h or allow_shorter_than_topic: true"
write_nats_config "$WORK/n_allowed.yaml" "" "$(class 30m "    allow_shorter_than_topic: true")"
passes n_allowed "$WORK/n_allowed.yaml"
write_nats_config "$WORK/n_long.yaml" "" "$(class 2h)"
passes n_long "$WORK/n_long.yaml"
grep -q "^stream $STREAM on nats://.*: exists" "$WORK/n_long.out" || fail "check did not look at the stream: $(cat "$WORK/n_long.out")"
echo '{"order_id":"r1","user_id":3,"amount":10}' | publish
start d1 "$WORK/n_long.yaml"
nats_done
stop d1
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 3")" 990 "applied with keep 2h on a 1h stream"
log "ok: NATS max_age 1h refuses keep 30m with the numbers, passes it allowed, runs with keep 2h"

"$NT" maxage "$STREAM" 0
refused n_ever "$WORK/n_long.yaml" \
        "stream $STREAM: retention class 'notify' keeps keys 2h but the stream retains messages for ever (max_age 0, unlimited): a message still in the stream could be replayed after its key was purged — no keep is long enough"
passes n_ever_allowed "$WORK/n_allowed.yaml"
log "ok: NATS max_age 0 (unlimited) refuses any keep, passes it allowed"

# ---- RabbitMQ: AMQP cannot read a queue's message TTL (argument or policy): said, not refused
. "$(dirname "$0")/rmq_lib.sh"
Q="ret_floor_$$"
rmq_queue "$Q" '{"x-message-ttl":3600000}'
rmq_write_config "$WORK/r_short.yaml" "$Q" "$(class 30m)"
out=$("$DEDUPCTL" check -c "$WORK/r_short.yaml" 2>&1) || fail "check of a RabbitMQ queue with a class exited $?: $out"
grep -qF "queue $Q: its message TTL is not checked against retention class 'notify' (keep 30m): AMQP does not show a queue's x-message-ttl argument nor a policy's message-ttl" <<<"$out" ||
        fail "check does not say the queue's TTL was not checked: $out"
start r1 "$WORK/r_short.yaml"
echo '{"order_id":"q1","user_id":4,"amount":10}' | rmq_publish "$Q"
rmq_wait_empty "$Q"
stop r1
grep -qF "queue $Q: its message TTL is not checked against retention class 'notify'" "$WORK/r1.log" ||
        fail "dedupd does not say the queue's TTL was not checked"
rmq_write_config "$WORK/r_allowed.yaml" "$Q" "$(class 30m "    allow_shorter_than_topic: true")"
out=$("$DEDUPCTL" check -c "$WORK/r_allowed.yaml" 2>&1) || fail "check (allowed) exited $?: $out"
if grep -q "not checked against retention class" <<<"$out"; then fail "allow_shorter_than_topic still warns: $out"; fi
log "ok: RabbitMQ says the queue's message TTL was not checked (AMQP cannot read it), not with allow_shorter_than_topic"
