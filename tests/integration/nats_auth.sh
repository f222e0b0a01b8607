#!/usr/bin/env bash
# NATS authentication and TLS, against nats-server processes of the test's
# own (JetStream on, own ports, own stores, killed at the end):
# 1. token auth (nats.token): the seed's scenario (9527/PAY published 100
#    times by four publishers) -> one effect, balance 990; a wrong token makes
#    dedupd exit 1 within startup_timeout_ms with an ERROR line naming the
#    authorization failure; the token is in neither dedupd's debug log nor
#    `dedupctl check --print`;
# 2. TLS with a throwaway CA (nats.tls_ca, a server certificate for 127.0.0.1
#    and localhost) and user:password in nats.url: the same scenario -> one
#    effect; a wrong CA makes dedupd exit 1 within startup_timeout_ms with an
#    ERROR line naming the TLS failure; the password is never shown.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"

# scenario USER ORDER: ORDER/PAY published 100 times by four publishers, dedupd
# d-$SUBJ runs it (config $WORK/$SUBJ.yaml) -> one effect, balance 990
scenario() {
        local user=$1 order=$2 pubs=() name="d_$SUBJ"
        start "$name" "$WORK/$SUBJ.yaml"
        for p in 1 2 3 4; do
                (for i in $(seq 1 25); do
                        echo "{\"order_id\":\"$order\",\"user_id\":$user,\"amount\":10}"
                done | publish "publisher:$p") &
                pubs+=($!)
        done
        for pid in "${pubs[@]}"; do wait "$pid" || fail "a publisher failed"; done
        assert_eq "$(last_seq)" 100 "messages in the stream ($SUBJ)"
        nats_done 60
        stop "$name"
        assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key = '$order/PAY'")" 1 "ledger rows for $order/PAY"
        assert_eq "$(sql "SELECT balance FROM account WHERE user_id = $user")" 990 "balance of user $user"
        assert_eq "$(sql "SELECT sum(applied) || '/' || sum(duplicates) FROM dedupd.offsets WHERE topic = '$SUBJ'")" "1/99" "applied/duplicates counted ($SUBJ)"
        assert_eq "$(consumer_field ack_pending)" 0 "messages left unacknowledged ($SUBJ)"
}

# refused CONFIG WHAT PATTERN: dedupd exits 1 within startup_timeout_ms (3000)
# with an ERROR line matching PATTERN
refused() {
        local cfg=$1 what=$2 pattern=$3 rc=0 t0 ms
        sed -i "s|^shutdown_timeout_ms: 15000|startup_timeout_ms: 3000\nshutdown_timeout_ms: 15000|" "$cfg"
        t0=$(date +%s%N)
        "$DEDUPD" -c "$cfg" >"$cfg.log" 2>&1 || rc=$?
        ms=$((($(date +%s%N) - t0) / 1000000))
        assert_eq "$rc" 1 "dedupd with $what exits"
        grep "ERROR" "$cfg.log" | grep -q -- "$pattern" ||
                fail "dedupd does not say $what failed: $(grep ERROR "$cfg.log" || tail -n 3 "$cfg.log")"
        ((ms < 8000)) || fail "dedupd took $ms ms to give up (startup_timeout_ms 3000)"
        log "ok: $what refused after $ms ms: $(grep ERROR "$cfg.log" | head -n 1)"
}

export LOG_LEVEL=debug

# ---- 1. token auth
TOKEN="Tk$$-$RANDOM-sekrit"
PORT_A=$(free_port)
nats_server tok "$PORT_A" "authorization { token: \"$TOKEN\" }"
export NATS_URL="nats://127.0.0.1:$PORT_A" NATS_TOKEN=$TOKEN
SUBJ="tok.$ID" CONSUMER="${DURABLE}-tok_$ID"
STREAM="T_$ID"
write_nats_config "$WORK/$SUBJ.yaml" "  token: \"$TOKEN\""
nats_stream
rc=0; "$DEDUPCTL" check -c "$WORK/$SUBJ.yaml" --print >"$WORK/check_tok.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "check of the token config exits"
grep -q "^nats.token: (set, not shown)$" "$WORK/check_tok.out" || fail "check --print shows the token: $(grep nats.token "$WORK/check_tok.out")"
scenario 1 9527
if grep -q -- "$TOKEN" "$WORK/check_tok.out" "$WORK"/d_*.log; then fail "the token was printed or logged"; fi
grep -q " DEBUG " "$WORK/d_$SUBJ.log" || fail "dedupd's log is not at debug level"
log "ok: the token is in neither check --print nor dedupd's debug log"

# no token at all, and a wrong one
write_nats_config "$WORK/notoken.yaml"
refused "$WORK/notoken.yaml" "no token" "waiting for NATS: cannot connect to NATS at nats://127.0.0.1:$PORT_A: Authentication Violation: .*Authorization Violation"
write_nats_config "$WORK/badtoken.yaml" "  token: \"wrong-$TOKEN\""
refused "$WORK/badtoken.yaml" "a wrong token" "waiting for NATS: cannot connect to NATS at nats://127.0.0.1:$PORT_A: Authentication Violation: .*Authorization Violation"
rc=0; "$DEDUPCTL" check -c "$WORK/badtoken.yaml" --print >"$WORK/check_bad.out" 2>&1 || rc=$?
assert_eq "$rc" 2 "check with a wrong token exits"
grep -q "Authorization Violation" "$WORK/check_bad.out" || fail "check does not say the token was refused: $(grep -i nats "$WORK/check_bad.out")"
if grep -q -- "$TOKEN" "$WORK/badtoken.yaml.log" "$WORK/check_bad.out"; then fail "the wrong token was logged"; fi
unset NATS_TOKEN

# ---- 2. TLS with a throwaway CA, user and password in the URL
TLS="$WORK/tls"
mkdir -p "$TLS"
(
        cd "$TLS"
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=nats_auth test CA" \
                -keyout ca.key -out ca.crt
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=nats_auth wrong CA" \
                -keyout wrong-ca.key -out wrong-ca.crt
        openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >ext.cnf
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
                -extfile ext.cnf -out server.crt
) >"$WORK/openssl.log" 2>&1 || fail "openssl: $(tail -n 5 "$WORK/openssl.log")"
PW="Pw$$-$RANDOM-hidden"
PORT_B=$(free_port)
nats_server tls "$PORT_B" "tls { cert_file: \"$TLS/server.crt\", key_file: \"$TLS/server.key\" }
authorization { users: [ { user: dedupd, password: \"$PW\" } ] }"
export NATS_URL="nats://dedupd:$PW@127.0.0.1:$PORT_B" NATS_TLS_CA=$TLS/ca.crt
SUBJ="tls.$ID" CONSUMER="${DURABLE}-tls_$ID"
STREAM="L_$ID"
write_nats_config "$WORK/$SUBJ.yaml" "  tls_ca: \"$TLS/ca.crt\""
nats_stream
rc=0; "$DEDUPCTL" check -c "$WORK/$SUBJ.yaml" --print >"$WORK/check_tls.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "check of the TLS config exits"
grep -q "^nats.url: (set, not shown)$" "$WORK/check_tls.out" || fail "check --print shows the URL"
scenario 2 9528
if grep -q -- "$PW" "$WORK/check_tls.out" "$WORK/d_$SUBJ.log"; then fail "the password was printed or logged"; fi
log "ok: the password is in neither check --print nor dedupd's debug log"

# the server's certificate from another CA
write_nats_config "$WORK/wrongca.yaml" "  tls_ca: \"$TLS/wrong-ca.crt\""
refused "$WORK/wrongca.yaml" "a wrong CA" "waiting for NATS: cannot connect to NATS at nats://127.0.0.1:$PORT_B: SSL Error: .*SSL handshake error: .*unable to get local issuer certificate"
if grep -q -- "$PW" "$WORK/wrongca.yaml.log"; then fail "the password was logged"; fi
# TLS required by the server, none configured
write_nats_config "$WORK/notls.yaml"
refused "$WORK/notls.yaml" "no TLS" "waiting for NATS: cannot connect to NATS at nats://127.0.0.1:$PORT_B: SSL Error: .*SSL handshake error"
if grep -q -- "$PW" "$WORK/notls.yaml.log"; then fail "the password was logged"; fi
