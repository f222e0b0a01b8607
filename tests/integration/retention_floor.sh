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

# ---- RabbitMQ: a queue's message TTL is the smaller of its x-message-ttl argument and its policy's
# message-ttl. AMQP shows neither: dedupd and check say so; the management HTTP API shows both, read
# by rmqretention (rmq_queues_retention with the URL that is not a setting yet).
. "$(dirname "$0")/rmq_lib.sh"
RT="$BUILD/tests/rmqretention"
[[ -n ${RABBITMQ_MANAGEMENT_URL:-} ]] || fail "no RABBITMQ_MANAGEMENT_URL in .run/env: run scripts/services up"
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
log "ok: dedupd and check say the queue's message TTL was not checked (AMQP cannot read it), not with allow_shorter_than_topic"

# lint NAME FILE: rmqretention through the management API; its exit code in RC, its output in $WORK/NAME.rt
lint() {
        RC=0
        "$RT" "$2" "$RABBITMQ_MANAGEMENT_URL" >"$WORK/$1.rt" 2>&1 || RC=$?
}
# lint_says NAME FILE CODE PHRASE: lint exits CODE saying PHRASE (the API's view of a policy is a few seconds late)
lint_says() {
        lint "$1" "$2"
        [[ $RC == "$3" ]] && grep -qF -- "$4" "$WORK/$1.rt"
}
lint r_arg "$WORK/r_short.yaml"
assert_eq "$RC" 1 "the lint of keep 30m on x-message-ttl 1h exits"
grep -qF "queue $Q: retention class 'notify' keeps keys 30m but the queue retains messages for 1h (x-message-ttl=3600000): a message still in the queue could be replayed after its key was purged — 30m too short; set keep >= 1h or allow_shorter_than_topic: true" "$WORK/r_arg.rt" ||
        fail "the lint does not give the numbers: $(cat "$WORK/r_arg.rt")"
lint r_allowed "$WORK/r_allowed.yaml"
assert_eq "$RC" 0 "the lint of keep 30m allowed shorter exits"
rmq_write_config "$WORK/r_long.yaml" "$Q" "$(class 2h)"
lint r_long "$WORK/r_long.yaml"
assert_eq "$RC" 0 "the lint of keep 2h on x-message-ttl 1h exits"
grep -qF "queue $Q: x-message-ttl=3600000, class 'notify' keeps keys long enough" "$WORK/r_long.rt" || fail "the lint did not read the TTL: $(cat "$WORK/r_long.rt")"
log "ok: x-message-ttl 1h refuses keep 30m with the numbers, passes it allowed, passes keep 2h"

# A policy's message-ttl: alone it decides; with the argument, the smaller wins.
P="ret_floor_$$"
Q2="ret_floor_pol_$$"
rmq_queue "$Q2"
rmq_write_config "$WORK/p_none.yaml" "$Q2" "$(class 2h)"
lint p_none "$WORK/p_none.yaml"
assert_eq "$RC" 1 "the lint of a queue with no TTL exits"
grep -qF "queue $Q2: retention class 'notify' keeps keys 2h but the queue retains messages for ever (no message TTL: neither x-message-ttl nor a policy's message-ttl): a message still in the queue could be replayed after its key was purged — no keep is long enough" "$WORK/p_none.rt" ||
        fail "the lint does not say the queue keeps messages for ever: $(cat "$WORK/p_none.rt")"
rmqctl set_policy "$P" "^ret_floor_(pol_)?$$\$" '{"message-ttl":3600000}' --apply-to queues >/dev/null
on_exit "rmqctl clear_policy $P >/dev/null"
rmq_write_config "$WORK/p_short.yaml" "$Q2" "$(class 30m)"
poll 30 lint_says p_short "$WORK/p_short.yaml" 1 "queue $Q2: retention class 'notify' keeps keys 30m but the queue retains messages for 1h (message-ttl=3600000 of policy $P)" ||
        fail "the lint does not refuse keep 30m under the policy's message-ttl 1h: $(cat "$WORK/p_short.rt")"
rmq_write_config "$WORK/p_long.yaml" "$Q2" "$(class 1h)"
lint p_long "$WORK/p_long.yaml"
assert_eq "$RC" 0 "the lint of keep 1h under the policy's message-ttl 1h exits"
rmqctl set_policy "$P" "^ret_floor_(pol_)?$$\$" '{"message-ttl":1200000}' --apply-to queues >/dev/null
poll 30 lint_says p_min "$WORK/r_short.yaml" 0 "queue $Q: message-ttl=1200000 of policy $P, class 'notify' keeps keys long enough" ||
        fail "x-message-ttl 1h and the policy's 20m: the smaller does not win: $(cat "$WORK/p_min.rt")"
log "ok: a policy's message-ttl alone refuses a shorter keep; with x-message-ttl the smaller wins; no TTL is for ever"

# Over https: verified against rabbitmq.ca_file (the broker's CA); without it the system's CAs do not know it.
rmq_write_config "$WORK/t_short.yaml" "$Q2" "$(class 10m)" "  ca_file: \"$RABBITMQ_CA_FILE\""
RABBITMQ_MANAGEMENT_URL=$RABBITMQ_MANAGEMENT_TLS_URL lint t_short "$WORK/t_short.yaml"
assert_eq "$RC" 1 "the lint over https of keep 10m under the policy's 20m exits"
grep -qF "queue $Q2: retention class 'notify' keeps keys 10m but the queue retains messages for 20m (message-ttl=1200000 of policy $P)" "$WORK/t_short.rt" ||
        fail "the lint over https does not refuse keep 10m: $(cat "$WORK/t_short.rt")"
RABBITMQ_MANAGEMENT_URL=$RABBITMQ_MANAGEMENT_TLS_URL lint t_noca "$WORK/p_short.yaml"
assert_eq "$RC" 0 "the lint over https with a CA that does not know the server exits"
grep -qF "could not read x-message-ttl nor the policy's message-ttl: TLS: the server's certificate is not trusted" "$WORK/t_noca.rt" ||
        fail "an untrusted certificate is not said: $(cat "$WORK/t_noca.rt")"
log "ok: over https the certificate is verified (rabbitmq.ca_file): trusted, the lint refuses; not trusted, not checked and said"

# A management API that takes the connection and never answers: given up after 5 s, said.
"$BUILD/tests/blackhole" 60 >"$WORK/hole.port" &
PIDS[hole]=$!
for ((i = 0; i < 50; i++)); do [[ -s $WORK/hole.port ]] && break; sleep 0.1; done
HOLE=$(cat "$WORK/hole.port")
t0=$SECONDS
RABBITMQ_MANAGEMENT_URL="http://guest:guest@127.0.0.1:$HOLE" lint t_hole "$WORK/p_short.yaml"
assert_eq "$RC" 0 "the lint with a management API that never answers exits"
((SECONDS - t0 <= 8)) || fail "the lint waited $((SECONDS - t0)) s for an API that never answers"
grep -qF "could not read x-message-ttl nor the policy's message-ttl: 127.0.0.1:$HOLE: no complete answer in time" "$WORK/t_hole.rt" ||
        fail "an API that never answers is not said: $(cat "$WORK/t_hole.rt")"
log "ok: a management API that never answers: given up after $((SECONDS - t0)) s, not checked, said"

BAD="Pw${$}nope"
RABBITMQ_MANAGEMENT_URL=${RABBITMQ_MANAGEMENT_URL/guest@/$BAD@} lint p_login "$WORK/r_long.yaml"
assert_eq "$RC" 0 "the lint with a refused login exits"
grep -qF "queue $Q: its message TTL is not checked against retention class 'notify' (keep 2h): could not read x-message-ttl nor the policy's message-ttl: the management API at 127.0.0.1:" "$WORK/p_login.rt" ||
        fail "a refused login is not said: $(cat "$WORK/p_login.rt")"
grep -qF "refused user 'guest' (401)" "$WORK/p_login.rt" || fail "the refusal does not name the user: $(cat "$WORK/p_login.rt")"
if grep -q "$BAD" "$WORK/p_login.rt"; then fail "the password was printed"; fi
log "ok: a management API that refuses the login: not checked, said with the user and never the password"
