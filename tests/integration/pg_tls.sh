#!/usr/bin/env bash
# PostgreSQL over TLS (scripts/services: ssl=on, a server certificate for
# 127.0.0.1 and localhost from a throwaway CA, pg_hba "hostssl ... cert" for
# role dedupd_cert):
# 1. sslmode=verify-full: dedupd applies a workload exactly once, and every
#    connection it holds is encrypted;
# 2. a wrong CA and a host name the certificate does not name each make
#    dedupd exit 1 within startup_timeout_ms with one ERROR line saying so,
#    and dedupctl check exit 2;
# 3. a client certificate and no password: dedupd runs as dedupd_cert, which
#    cannot log in without it.
. "$(dirname "$0")/lib.sh"

[[ -f ${DEDUPD_TLS_DIR:-}/ca.crt && -n ${PG_CERT_ROLE:-} ]] ||
        fail "the test servers have no TLS: run scripts/services down, then scripts/services up"
TLS=$DEDUPD_TLS_DIR
DB2="${DB}_cert"
on_exit 'psql "$PG_DSN" -X -q -c "DROP DATABASE IF EXISTS \"$DB2\" WITH (FORCE)" >/dev/null 2>&1'

T="pay_pgtls_$$"
topic "$T" 2
workload "$WORK/w.txt" "$WORK/keys.txt" 2000 1500
"$KT" produce -t "$T" <"$WORK/w.txt"
VERIFY="host=127.0.0.1 port=$PGPORT dbname=$DB user=postgres sslmode=verify-full sslrootcert=$TLS/ca.crt"
# tls_config FILE CONNINFO [GROUP_SUFFIX]
tls_config() {
        write_config "$1" "$T"
        sed -i -e "s#conninfo: \".*\"#conninfo: \"$2\"#" -e "s#group.id: \"grp-$ID\"#group.id: \"grp-$ID${3:-}\"#" \
                -e "s/^shutdown_timeout_ms:/startup_timeout_ms: 8000\nshutdown_timeout_ms:/" "$1"
}
# ssl_of DB: "t N" — every client connection to DB but ours encrypted, and how many
ssl_of() {
        psql "$PG_DSN" -X -t -A -F ' ' -c "SELECT coalesce(bool_and(s.ssl), false), count(*) FROM pg_stat_activity a
                JOIN pg_stat_ssl s USING (pid) WHERE a.datname = '$1' AND a.backend_type = 'client backend'"
}

# ---- 1. verify-full -------------------------------------------------------------
tls_config "$WORK/verify.yaml" "$VERIFY"
"$DEDUPCTL" check -c "$WORK/verify.yaml" >"$WORK/check.out" 2>&1 || fail "dedupctl check with verify-full: $(cat "$WORK/check.out")"
start verify "$WORK/verify.yaml"
wait_done "$T" 120
read -r enc n <<<"$(ssl_of "$DB")"
assert_eq "$enc" t "every connection of dedupd encrypted ($n)"
stop verify
check_invariants "$WORK/keys.txt"
log "ok: sslmode=verify-full: 1500 keys applied exactly once over $n encrypted connections"

# ---- 2. a wrong CA, a name the certificate does not hold ---------------------------
expect_failure() { # NAME CONFIG WANT...
        local name=$1 cfg=$2 rc=0 t0 ms err
        shift 2
        t0=$(date +%s%N)
        timeout 60 "$DEDUPD" -c "$cfg" >"$WORK/$name.log" 2>&1 || rc=$?
        ms=$((($(date +%s%N) - t0) / 1000000))
        assert_eq "$rc" 1 "$name: dedupd exit code"
        ((ms < 20000)) || fail "$name: dedupd took $ms ms (startup_timeout_ms 8000)"
        assert_eq "$(grep -c ' ERROR ' "$WORK/$name.log" || true)" 1 "$name: ERROR lines"
        err=$(grep ' ERROR ' "$WORK/$name.log")
        for w in "$@"; do
                [[ $err == *"$w"* ]] || fail "$name: the ERROR line lacks '$w': $err"
        done
        rc=0
        timeout 60 "$DEDUPCTL" check -c "$cfg" >"$WORK/$name-check.out" 2>&1 || rc=$?
        assert_eq "$rc" 2 "$name: dedupctl check exit code"
        for w in "$@"; do
                grep -qF -- "$w" "$WORK/$name-check.out" || fail "$name: check lacks '$w': $(cat "$WORK/$name-check.out")"
        done
        log "ok: $name: exit 1 after $ms ms: ${err#* ERROR  }"
}
tls_config "$WORK/wrong-ca.yaml" "${VERIFY/ca.crt/wrong-ca.crt}" -x
expect_failure wrong_ca "$WORK/wrong-ca.yaml" "127.0.0.1:$PGPORT/$DB" "certificate verify failed"
# libpq connects to hostaddr and checks the certificate against host
tls_config "$WORK/wrong-name.yaml" "${VERIFY/host=127.0.0.1/host=db.example.invalid hostaddr=127.0.0.1}" -x
expect_failure wrong_name "$WORK/wrong-name.yaml" "db.example.invalid:$PGPORT/$DB" "does not match host name \"db.example.invalid\""

# ---- 3. a client certificate, no password -----------------------------------------
psql "$PG_DSN" -X -q -v ON_ERROR_STOP=1 -c "DO \$\$ BEGIN IF to_regrole('$PG_CERT_ROLE') IS NULL THEN CREATE ROLE $PG_CERT_ROLE LOGIN; END IF; END \$\$" \
        -c "CREATE DATABASE \"$DB2\" OWNER $PG_CERT_ROLE" >/dev/null
psql "${PG_DSN/dbname=dedupd/dbname=$DB2}" -X -q -c "GRANT CREATE ON SCHEMA public TO $PG_CERT_ROLE" >/dev/null
CERT="host=localhost port=$PGPORT dbname=$DB2 user=$PG_CERT_ROLE sslmode=verify-full sslrootcert=$TLS/ca.crt"
out=$(psql "$CERT" -X -c "SELECT 1" 2>&1 || true)
[[ $out == *"connection requires a valid client certificate"* ]] || fail "$PG_CERT_ROLE logged in without a certificate: $out"
CERT="$CERT sslcert=$TLS/$PG_CERT_ROLE.crt sslkey=$TLS/$PG_CERT_ROLE.key"
tls_config "$WORK/cert.yaml" "$CERT" -cert
grep -q password "$WORK/cert.yaml" && fail "the config holds a password"
"$DEDUPCTL" migrate -c "$WORK/cert.yaml" >"$WORK/migrate.out" 2>&1 || fail "migrate with a client certificate: $(cat "$WORK/migrate.out")"
start cert "$WORK/cert.yaml"
for ((i = 0; i < 1200; i++)); do
        got=$(psql "${PG_DSN/dbname=dedupd/dbname=$DB2}" -X -t -A -c "SELECT coalesce(sum(next_offset),0) FROM dedupd.offsets WHERE topic = '$T'" 2>/dev/null || echo 0)
        [[ $got == 2000 ]] && break
        sleep 0.1
done
assert_eq "$got" 2000 "records the client-certificate run progressed over"
dn=$(psql "$PG_DSN" -X -t -A -c "SELECT string_agg(DISTINCT s.client_dn, ',') FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
        WHERE a.datname = '$DB2' AND a.usename = '$PG_CERT_ROLE'")
assert_eq "$dn" "/CN=$PG_CERT_ROLE" "the client certificate dedupd presented"
stop cert
TEST_DSN="${PG_DSN/dbname=dedupd/dbname=$DB2}" check_invariants "$WORK/keys.txt"
log "ok: a client certificate and no password: 1500 keys applied exactly once as $PG_CERT_ROLE"
