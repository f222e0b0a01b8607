#!/usr/bin/env bash
# amqps:// with rabbitmq.ca_file: dedupd verifies the broker's certificate
# (and its host name) against the CA and consumes over TLS; without the CA the
# same broker is refused at startup, and the message says it is the
# certificate, never the URL's password.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rmq_lib.sh"
[[ -n ${RABBITMQ_TLS_URL:-} ]] || fail "no RABBITMQ_TLS_URL in .run/env: run scripts/services up again"

Q="pay_tls_$$"
rmq_queue "$Q"
export RMQ_TEST_URL=$RABBITMQ_TLS_URL
rmq_write_config "$WORK/c.yaml" "$Q" "" "  ca_file: \"$RABBITMQ_CA_FILE\""
for i in 1 2 3 1 2 3; do printf '{"order_id":"t-%d","user_id":5,"amount":10}\n' "$i"; done | rmq_publish "$Q"
start d1 "$WORK/c.yaml"
rmq_wait_empty "$Q"
stop d1
grep -q "connected to amqps://localhost:[0-9]* vhost /" "$WORK/d1.log" || fail "no amqps connection line"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 5")" 970 "balance after three orders, each sent twice, over TLS"

rmq_write_config "$WORK/noca.yaml" "$Q"
sed -i 's/^startup_timeout_ms:.*//; s/^shutdown_timeout_ms: 15000/shutdown_timeout_ms: 15000\nstartup_timeout_ms: 3000/' "$WORK/noca.yaml"
rc=0
timeout 60 "$DEDUPD" -c "$WORK/noca.yaml" >"$WORK/noca.log" 2>&1 || rc=$?
assert_eq "$rc" 1 "dedupd exit code when the broker's certificate cannot be verified"
grep -qi "amqps://localhost:[0-9]* vhost /: .*\(ssl\|tls\|certificate\|verif\)" "$WORK/noca.log" || fail "the refusal does not say it is TLS: $(tail -n 3 "$WORK/noca.log")"
if grep -q "guest:guest" "$WORK/noca.log"; then fail "the URL's password is in the log"; fi
log "ok: without the CA the certificate is refused: $(grep -o 'amqps://localhost:[0-9]* vhost /: [^(]*' "$WORK/noca.log" | head -n 1)"
