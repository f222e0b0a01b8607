#!/usr/bin/env bash
# The retention floor on NATS and RabbitMQ, as on Kafka: a retention class
# that keeps keys shorter than the broker keeps messages is refused by
# dedupctl check (exit 1) and dedupd (exit 2) with the numbers, unless
# allow_shorter_than_topic; a stream or queue that keeps messages for ever
# refuses any keep; a keep as long as the broker's passes. RabbitMQ's TTLs come from the
# management API (rabbitmq.management_url, over libcurl): http and https, and
# the ways it can fail, said without the password.
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
# message-ttl. AMQP shows neither: without rabbitmq.management_url dedupd and check say so; with it,
# the management HTTP API shows both.
. "$(dirname "$0")/rmq_lib.sh"
[[ -n ${RABBITMQ_MANAGEMENT_URL:-} ]] || fail "no RABBITMQ_MANAGEMENT_URL in .run/env: run scripts/services up"
Q="ret_floor_$$"
rmq_queue "$Q" '{"x-message-ttl":3600000}'
rmq_write_config "$WORK/r_unset.yaml" "$Q" "$(class 30m)"
out=$("$DEDUPCTL" check -c "$WORK/r_unset.yaml" 2>&1) || fail "check of a RabbitMQ queue with a class exited $?: $out"
grep -qF "queue $Q: its message TTL is not checked against retention class 'notify' (keep 30m): AMQP does not show a queue's x-message-ttl argument nor a policy's message-ttl; set rabbitmq.management_url to read them from the management API" <<<"$out" ||
        fail "check does not say the queue's TTL was not checked: $out"
start r1 "$WORK/r_unset.yaml"
echo '{"order_id":"q1","user_id":4,"amount":10}' | rmq_publish "$Q"
rmq_wait_empty "$Q"
stop r1
grep -qF "queue $Q: its message TTL is not checked against retention class 'notify'" "$WORK/r1.log" ||
        fail "dedupd does not say the queue's TTL was not checked"
log "ok: without rabbitmq.management_url dedupd and check say the queue's message TTL was not checked, and run"

# The management API as the least a user needs: the monitoring tag and access to the vhost (no
# permission on any resource); its password is its own, so no output may hold it.
MON="ret_mon_$$"
PW="Mon${$}pw"
rmqctl add_user "$MON" "$PW" >/dev/null
on_exit "rmqctl delete_user $MON >/dev/null"
rmqctl set_user_tags "$MON" monitoring >/dev/null
rmqctl set_permissions -p / "$MON" "" "" "" >/dev/null
MGMT=${RABBITMQ_MANAGEMENT_URL/guest:guest@/$MON:$PW@}
MGMT_TLS=${RABBITMQ_MANAGEMENT_TLS_URL/guest:guest@/$MON:$PW@}
[[ $MGMT == *"$PW"* && $MGMT_TLS == *"$PW"* ]] || fail "the management URLs do not read guest:guest@: $RABBITMQ_MANAGEMENT_URL"

# mgmt_config FILE QUEUE KEEP [CLASS_YAML] [URL] [RABBITMQ_YAML]: a config with rabbitmq.management_url (MGMT)
# and the class; with LOG_LEVEL=debug dedupd logs the TTL it read
mgmt_config() {
        rmq_write_config "$1" "$2" "$(class "$3" "${4:-}")" "  management_url: \"${5:-$MGMT}\"
${6:-}"
}
# check_says NAME FILE CODE PHRASE: check exits CODE saying PHRASE (the API's view of a policy is a few seconds late)
check_says() {
        local rc=0
        "$DEDUPCTL" check -c "$2" >"$WORK/$1.out" 2>&1 || rc=$?
        [[ $rc == "$3" ]] && grep -qF -- "$4" "$WORK/$1.out"
}
# unchecked NAME FILE PHRASE: check passes, saying the TTL was not checked because PHRASE
unchecked() {
        check_says "$1" "$2" 0 "its message TTL is not checked against retention class 'notify'" ||
                fail "check ($1) does not pass with the TTL not checked: $(cat "$WORK/$1.out")"
        grep -qF -- "could not read x-message-ttl nor the policy's message-ttl: $3" "$WORK/$1.out" ||
                fail "check ($1) does not say why: $3: $(cat "$WORK/$1.out")"
}

mgmt_config "$WORK/r_short.yaml" "$Q" 30m
refused r_short "$WORK/r_short.yaml" \
        "queue $Q: retention class 'notify' keeps keys 30m but the queue retains messages for 1h (x-message-ttl=3600000): a message still in the queue could be replayed after its key was purged — 30m too short; set keep >= 1h or allow_shorter_than_topic: true"
mgmt_config "$WORK/r_allowed.yaml" "$Q" 30m "    allow_shorter_than_topic: true"
passes r_allowed "$WORK/r_allowed.yaml"
if grep -q "not checked against retention class" "$WORK/r_allowed.out"; then fail "allow_shorter_than_topic still warns: $(cat "$WORK/r_allowed.out")"; fi
LOG_LEVEL=debug mgmt_config "$WORK/r_long.yaml" "$Q" 2h
passes r_long "$WORK/r_long.yaml"
if grep -q "not checked against retention class" "$WORK/r_long.out"; then fail "check did not read the TTL: $(cat "$WORK/r_long.out")"; fi
start r2 "$WORK/r_long.yaml"
echo '{"order_id":"q2","user_id":4,"amount":10}' | rmq_publish "$Q"
rmq_wait_empty "$Q"
stop r2
grep -qF "queue $Q: x-message-ttl=3600000, class 'notify' keeps keys long enough" "$WORK/r2.log" ||
        fail "dedupd did not read the TTL: $(grep rabbitmq "$WORK/r2.log")"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 4")" 980 "applied with keep 2h on x-message-ttl 1h"
log "ok: x-message-ttl 1h refuses keep 30m with the numbers (check 1, dedupd 2), passes it allowed, runs with keep 2h"

# A policy's message-ttl: alone it decides; with the argument, the smaller wins; neither is for ever.
P="ret_floor_$$"
Q2="ret_floor_pol_$$"
rmq_queue "$Q2"
mgmt_config "$WORK/p_none.yaml" "$Q2" 2h
refused p_none "$WORK/p_none.yaml" \
        "queue $Q2: retention class 'notify' keeps keys 2h but the queue retains messages for ever (no message TTL: neither x-message-ttl nor a policy's message-ttl): a message still in the queue could be replayed after its key was purged — no keep is long enough"
rmqctl set_policy "$P" "^ret_floor_(pol_)?$$\$" '{"message-ttl":3600000}' --apply-to queues >/dev/null
on_exit "rmqctl clear_policy $P >/dev/null"
mgmt_config "$WORK/p_short.yaml" "$Q2" 30m
SAYS="queue $Q2: retention class 'notify' keeps keys 30m but the queue retains messages for 1h (message-ttl=3600000 of policy $P)"
poll 30 check_says p_short "$WORK/p_short.yaml" 1 "$SAYS" ||
        fail "check does not refuse keep 30m under the policy's message-ttl 1h: $(cat "$WORK/p_short.out")"
refused p_short "$WORK/p_short.yaml" "$SAYS"
mgmt_config "$WORK/p_long.yaml" "$Q2" 1h
passes p_long "$WORK/p_long.yaml"
rmqctl set_policy "$P" "^ret_floor_(pol_)?$$\$" '{"message-ttl":1200000}' --apply-to queues >/dev/null
mgmt_config "$WORK/p_min.yaml" "$Q" 15m
poll 30 check_says p_min "$WORK/p_min.yaml" 1 "queue $Q: retention class 'notify' keeps keys 15m but the queue retains messages for 20m (message-ttl=1200000 of policy $P)" ||
        fail "x-message-ttl 1h and the policy's 20m: the smaller does not win: $(cat "$WORK/p_min.out")"
log "ok: a policy's message-ttl alone refuses a shorter keep; with x-message-ttl the smaller wins; no TTL is for ever"

# Over https: verified against rabbitmq.ca_file, the broker's CA, and refused under a CA that did not sign it.
mgmt_config "$WORK/t_short.yaml" "$Q2" 10m "" "$MGMT_TLS" "  ca_file: \"$RABBITMQ_CA_FILE\""
refused t_short "$WORK/t_short.yaml" \
        "queue $Q2: retention class 'notify' keeps keys 10m but the queue retains messages for 20m (message-ttl=1200000 of policy $P)"
[[ -s $DEDUPD_TLS_DIR/wrong-ca.crt ]] || fail "no $DEDUPD_TLS_DIR/wrong-ca.crt: run scripts/services up"
mgmt_config "$WORK/t_wrongca.yaml" "$Q2" 10m "" "$MGMT_TLS" "  ca_file: \"$DEDUPD_TLS_DIR/wrong-ca.crt\""
unchecked t_wrongca "$WORK/t_wrongca.yaml" "the management API at https://$MON@localhost:"
grep -qF "SSL certificate problem" "$WORK/t_wrongca.out" || fail "an untrusted certificate is not said: $(cat "$WORK/t_wrongca.out")"
log "ok: over https the certificate is verified (rabbitmq.ca_file): trusted, check refuses; under a wrong CA, not checked and said"

# A management API that takes the connection and never answers: given up after 5 s, said.
"$BUILD/tests/blackhole" 60 >"$WORK/hole.port" &
PIDS[hole]=$!
for ((i = 0; i < 50; i++)); do [[ -s $WORK/hole.port ]] && break; sleep 0.1; done
HOLE=$(cat "$WORK/hole.port")
mgmt_config "$WORK/t_hole.yaml" "$Q2" 10m "" "http://$MON:$PW@127.0.0.1:$HOLE"
t0=$SECONDS
unchecked t_hole "$WORK/t_hole.yaml" "the management API at http://$MON@127.0.0.1:$HOLE/api/queues/"
((SECONDS - t0 <= 8)) || fail "check waited $((SECONDS - t0)) s for an API that never answers"
grep -qF "Operation timed out after" "$WORK/t_hole.out" || fail "an API that never answers is not said: $(cat "$WORK/t_hole.out")"
log "ok: a management API that never answers: given up after $((SECONDS - t0)) s, not checked, said"

BAD="Pw${$}nope"
mgmt_config "$WORK/p_login.yaml" "$Q" 2h "" "${MGMT/:$PW@/:$BAD@}"
unchecked p_login "$WORK/p_login.yaml" "the management API at http://$MON@127.0.0.1:"
grep -qF "refused user '$MON' (401)" "$WORK/p_login.out" || fail "the refusal does not name the user: $(cat "$WORK/p_login.out")"
if grep -qF "$BAD" "$WORK/p_login.out"; then fail "the wrong password was printed: $(cat "$WORK/p_login.out")"; fi
log "ok: a management API that refuses the login: not checked, said with the user and never the password"

# No output of check or dedupd holds the management user's password.
leaks=$(grep -lF -- "$PW" "$WORK"/*.out "$WORK"/*.log || true)
[[ -z $leaks ]] || fail "the management password is in: $leaks"
log "ok: the management password is in no output of check or dedupd"
