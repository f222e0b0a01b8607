#!/usr/bin/env bash
# Kafka over TLS with SASL (SCRAM-SHA-512): the broker's SASL_SSL listener
# (scripts/services: a throwaway CA, a certificate for 127.0.0.1, a SCRAM user
# written at format time). The workload is produced over PLAINTEXT; every
# client dedupd and dedupctl make (consumer, dead-letter producer, topic
# check, verify's lag reader) speaks SASL_SSL, the password read from a file.
# 1. dedupd applies a workload with duplicates exactly once (rows, balances)
#    and dead-letters its one bad message, and dedupctl check and verify
#    reach the broker the same way;
# 2. a wrong CA and a wrong password each make dedupd exit 1 within
#    startup_timeout_ms with one ERROR line naming what failed, and dedupctl
#    check exit 2 naming it;
# 3. the password appears in no output of any of these runs.
. "$(dirname "$0")/lib.sh"

[[ -n ${KAFKA_SASL_SSL_BOOTSTRAP:-} && -f ${DEDUPD_TLS_DIR:-}/ca.crt ]] ||
        fail "the broker has no SASL_SSL listener: run scripts/services down, then scripts/services up"

T="pay_tls_$$"
topic "$T" 2
printf '%s\n' "$KAFKA_SCRAM_PASSWORD" >"$WORK/kafka-password"
chmod 600 "$WORK/kafka-password"
printf 'not-the-%s\n' "$KAFKA_SCRAM_PASSWORD" >"$WORK/wrong-password"
chmod 600 "$WORK/wrong-password"
write_config "$WORK/plain.yaml" "$T"
# tls_config FILE CA PASSWORD_FILE: the test's config over SASL_SSL
tls_config() {
        sed -e "s#bootstrap.servers: \".*\"#bootstrap.servers: \"$KAFKA_SASL_SSL_BOOTSTRAP\"\n  security.protocol: SASL_SSL\n  ssl.ca.location: \"$2\"\n  sasl.mechanisms: SCRAM-SHA-512\n  sasl.username: \"$KAFKA_SCRAM_USER\"\n  sasl.password: \"\${file:$3}\"#" \
                -e "s/^shutdown_timeout_ms:/startup_timeout_ms: 15000\nshutdown_timeout_ms:/" "$WORK/plain.yaml" >"$1"
}
tls_config "$WORK/tls.yaml" "$DEDUPD_TLS_DIR/ca.crt" "$WORK/kafka-password"

# ---- 1. exactly once over SASL_SSL -------------------------------------------------
"$DEDUPCTL" check -c "$WORK/tls.yaml" >"$WORK/check.out" 2>&1 || fail "dedupctl check over SASL_SSL: $(cat "$WORK/check.out")"
"$DEDUPCTL" migrate -c "$WORK/tls.yaml" >/dev/null
workload "$WORK/w.txt" "$WORK/keys.txt" 4000 2500
echo 'not json: dead-lettered by the producer, over SASL_SSL too' >>"$WORK/w.txt"
"$KT" produce -t "$T" <"$WORK/w.txt"
# At debug, with librdkafka's own security and broker debugging: the lines
# most likely to carry a secret.
sed -e 's/^log_level: .*/log_level: debug/' -e 's/^kafka:$/kafka:\n  debug: "security,broker"/' "$WORK/tls.yaml" >"$WORK/tls-debug.yaml"
start tls "$WORK/tls-debug.yaml"
wait_done "$T" 120
grep -q "sasl_ssl://$KAFKA_SASL_SSL_BOOTSTRAP.*SCRAM-SHA-512" "$WORK/tls.log" || fail "dedupd did not talk SASL_SSL: $(grep -m3 kafka "$WORK/tls.log")"
"$DEDUPCTL" verify -c "$WORK/tls.yaml" --expect-caught-up >"$WORK/verify.out" 2>&1 || fail "verify over SASL_SSL: $(cat "$WORK/verify.out")"
stop tls
check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" 2500 "keys"
assert_eq "$(kafka_lag "$T")" 0 "the group's lag (committed over SASL_SSL)"
"$KT" dump -t "$T.dlq" >"$WORK/dlq.txt"
assert_eq "$(grep -c '^  dedupd.reason=' "$WORK/dlq.txt")" 1 "dead letters (sent by dedupd's producer over SASL_SSL)"
grep -q 'not json: dead-lettered' "$WORK/dlq.txt" || fail "the dead letter: $(cat "$WORK/dlq.txt")"
log "ok: 4001 messages over SASL_SSL/SCRAM-SHA-512, 2500 keys applied exactly once, the one bad message dead-lettered; check and verify reach the broker"

# ---- 2. wrong CA, wrong password: fail fast and say what ---------------------------
# expect_failure NAME CONFIG WANT...: dedupd exits 1 well within its 15 s
# startup_timeout_ms (waiting mends neither: it gives up at the first
# refusal) with one ERROR line holding every WANT; dedupctl check exits 2
# naming it too
expect_failure() {
        local name=$1 cfg=$2 rc=0 t0 ms err
        shift 2
        t0=$(date +%s%N)
        timeout 120 "$DEDUPD" -c "$cfg" >"$WORK/$name.log" 2>&1 || rc=$?
        ms=$((($(date +%s%N) - t0) / 1000000))
        assert_eq "$rc" 1 "$name: dedupd exit code"
        ((ms < 10000)) || fail "$name: dedupd took $ms ms (startup_timeout_ms is 15000: it waited for what cannot come)"
        assert_eq "$(grep -c ' ERROR ' "$WORK/$name.log" || true)" 1 "$name: ERROR lines"
        err=$(grep ' ERROR ' "$WORK/$name.log")
        for w in "$@"; do
                [[ $err == *"$w"* ]] || fail "$name: the ERROR line lacks '$w': $err"
        done
        grep -q "assigned" "$WORK/$name.log" && fail "$name: joined the group anyway"
        rc=0
        timeout 120 "$DEDUPCTL" check -c "$cfg" >"$WORK/$name-check.out" 2>&1 || rc=$?
        assert_eq "$rc" 2 "$name: dedupctl check exit code"
        for w in "$@"; do
                grep -qF -- "$w" "$WORK/$name-check.out" || fail "$name: check lacks '$w': $(cat "$WORK/$name-check.out")"
        done
        log "ok: $name: exit 1 after $ms ms: ${err#* ERROR  }"
}
tls_config "$WORK/wrong-ca.yaml" "$DEDUPD_TLS_DIR/wrong-ca.crt" "$WORK/kafka-password"
expect_failure wrong_ca "$WORK/wrong-ca.yaml" "the TLS handshake with the Kafka broker(s) at $KAFKA_SASL_SSL_BOOTSTRAP (bootstrap.servers) failed (check ssl.ca.location" "certificate verify failed"
tls_config "$WORK/wrong-pw.yaml" "$DEDUPD_TLS_DIR/ca.crt" "$WORK/wrong-password"
expect_failure wrong_password "$WORK/wrong-pw.yaml" "the Kafka broker(s) at $KAFKA_SASL_SSL_BOOTSTRAP (bootstrap.servers) refused the SASL authentication" "invalid credentials"

# ---- 3. the password is in no output ------------------------------------------------
"$DEDUPCTL" check -c "$WORK/tls.yaml" --print >"$WORK/print.out" 2>&1 || fail "check --print: $(cat "$WORK/print.out")"
grep -qx "kafka.sasl.password: (set, not shown)" "$WORK/print.out" || fail "--print: $(grep sasl "$WORK/print.out")"
"$DEDUPD" --version >"$WORK/version.out" 2>&1
for f in "$WORK"/*.log "$WORK"/*.out; do
        if grep -qF -- "$KAFKA_SCRAM_PASSWORD" "$f"; then fail "the SASL password is in $(basename "$f"): $(grep -F -- "$KAFKA_SCRAM_PASSWORD" "$f" | head -2)"; fi
done
log "ok: the SASL password (right or wrong) is in none of $(ls "$WORK"/*.log "$WORK"/*.out | wc -l) outputs"
