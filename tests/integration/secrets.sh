#!/usr/bin/env bash
# Secrets from files (${file:/path}): the Kafka SASL password and the
# PostgreSQL password each live only in a file a secret manager would mount.
# Every output of a run with them is searched for either secret, and the test
# fails if one is found: dedupd at debug (human and JSON lines, librdkafka's
# security debugging on), dedupctl check, check --print, migrate, verify,
# inspect, stats, --version, runs with a wrong Kafka and a wrong database
# password, and config errors about values read from files. Also: the
# content is taken without its trailing newline (else neither password
# would work), a missing file is a config error at file:line:column naming
# the path, and a world-readable one is used with a warning.
. "$(dirname "$0")/lib.sh"

[[ -n ${KAFKA_SASL_SSL_BOOTSTRAP:-} && -n ${PG_PASSWORD_ROLE:-} ]] ||
        fail "the test servers have no TLS/SASL: run scripts/services down, then scripts/services up"
# The role is the one pg_hba names: one test at a time makes and drops it (the ASan run's too).
hold_lock pg_password_role exclusive
PG_SECRET="pg-Secret-$$-$RANDOM"
WRONG_PG="pg-Wrong-$$-$RANDOM"
WRONG_KAFKA="kafka-Wrong-$$-$RANDOM"
SECRETS=("$KAFKA_SCRAM_PASSWORD" "$PG_SECRET" "$WRONG_PG" "$WRONG_KAFKA")
# (the database first: the role owns it)
on_exit 'psql "$PG_DSN" -X -q -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" >/dev/null 2>&1
         psql "$PG_DSN" -X -q -c "DROP ROLE IF EXISTS $PG_PASSWORD_ROLE" >/dev/null 2>&1'

# The role logs in with its password only (pg_hba: scram-sha-256) and owns the database.
psql "$PG_DSN" -X -q -v ON_ERROR_STOP=1 -c "DROP ROLE IF EXISTS $PG_PASSWORD_ROLE" \
        -c "CREATE ROLE $PG_PASSWORD_ROLE LOGIN PASSWORD '$PG_SECRET'" -c "ALTER DATABASE \"$DB\" OWNER TO $PG_PASSWORD_ROLE" >/dev/null
sql "GRANT CREATE ON SCHEMA public TO $PG_PASSWORD_ROLE"
mkdir -m 700 "$WORK/secrets"
secret() { printf '%s\n' "$2" >"$WORK/secrets/$1"; chmod 600 "$WORK/secrets/$1"; } # NAME VALUE (with a newline)
secret kafka "$KAFKA_SCRAM_PASSWORD"
secret pg "$PG_SECRET"
secret kafka-wrong "$WRONG_KAFKA"
secret pg-wrong "$WRONG_PG"

T="pay_secrets_$$"
topic "$T" 2
# conf FILE KAFKA_SECRET PG_SECRET
conf() {
        write_config "$1" "$T"
        sed -i -e "s#conninfo: \".*\"#conninfo: \"host=127.0.0.1 port=$PGPORT dbname=$DB user=$PG_PASSWORD_ROLE password=\${file:$WORK/secrets/$3}\"#" \
                -e "s#bootstrap.servers: \".*\"#bootstrap.servers: \"$KAFKA_SASL_SSL_BOOTSTRAP\"\n  security.protocol: SASL_SSL\n  ssl.ca.location: \"$DEDUPD_TLS_DIR/ca.crt\"\n  sasl.mechanisms: SCRAM-SHA-512\n  sasl.username: \"$KAFKA_SCRAM_USER\"\n  sasl.password: \"\${file:$WORK/secrets/$2}\"#" \
                -e "s/^shutdown_timeout_ms:/startup_timeout_ms: 6000\nshutdown_timeout_ms:/" -e "s/^log_level: .*/log_level: debug/" "$1"
}
conf "$WORK/good.yaml" kafka pg
grep -qF -- "$PG_SECRET" "$WORK/good.yaml" && fail "the config holds the secret itself"

# ---- a run with the secrets ---------------------------------------------------------
"$DEDUPCTL" check -c "$WORK/good.yaml" >"$WORK/check.out" 2>&1 || fail "check: $(cat "$WORK/check.out")"
"$DEDUPCTL" check -c "$WORK/good.yaml" --print >"$WORK/print.out" 2>&1 || fail "check --print: $(cat "$WORK/print.out")"
grep -qx "postgres.conninfo: (set, not shown)" "$WORK/print.out" || fail "--print: $(grep conninfo "$WORK/print.out")"
grep -qx "kafka.sasl.password: (set, not shown)" "$WORK/print.out" || fail "--print: $(grep sasl "$WORK/print.out")"
"$DEDUPCTL" migrate -c "$WORK/good.yaml" >"$WORK/migrate.out" 2>&1 || fail "migrate: $(cat "$WORK/migrate.out")"
workload "$WORK/w.txt" "$WORK/keys.txt" 1200 1000
"$KT" produce -t "$T" <"$WORK/w.txt"
sed 's/^kafka:$/kafka:\n  debug: "security,broker,conf"/' "$WORK/good.yaml" >"$WORK/debug.yaml"
start run "$WORK/debug.yaml"
wait_done "$T" 120
"$DEDUPCTL" verify -c "$WORK/good.yaml" --expect-caught-up >"$WORK/verify.out" 2>&1 || fail "verify: $(cat "$WORK/verify.out")"
"$DEDUPCTL" inspect -c "$WORK/good.yaml" o-7/PAY >"$WORK/inspect.out" 2>&1 || fail "inspect: $(cat "$WORK/inspect.out")"
"$DEDUPCTL" stats -c "$WORK/good.yaml" >"$WORK/stats.out" 2>&1 || fail "stats: $(cat "$WORK/stats.out")"
stop run
check_invariants "$WORK/keys.txt"
# the same config, JSON lines
"$DEDUPD" -c "$WORK/debug.yaml" --log-format json >"$WORK/json.log" 2>&1 &
PIDS[json]=$!
sleep 4
stop json
"$DEDUPD" --version >"$WORK/version.out" 2>&1
"$DEDUPCTL" --version >"$WORK/ctl-version.out" 2>&1
log "ok: a run with both passwords read from files: 1000 keys applied exactly once"

# ---- wrong passwords ------------------------------------------------------------------
# run_fail NAME CONFIG WANT: dedupd exits 1 naming WANT; dedupctl check exits 2
run_fail() {
        local rc=0
        timeout 60 "$DEDUPD" -c "$2" >"$WORK/$1.log" 2>&1 || rc=$?
        assert_eq "$rc" 1 "$1: dedupd exit code"
        grep ' ERROR ' "$WORK/$1.log" | grep -qF -- "$3" || fail "$1: no ERROR naming '$3': $(grep ERROR "$WORK/$1.log")"
        rc=0
        timeout 60 "$DEDUPCTL" check -c "$2" >"$WORK/$1-check.out" 2>&1 || rc=$?
        assert_eq "$rc" 2 "$1: dedupctl check exit code"
        grep -qF -- "$3" "$WORK/$1-check.out" || fail "$1: check does not name '$3': $(cat "$WORK/$1-check.out")"
}
conf "$WORK/wrong-kafka.yaml" kafka-wrong pg
run_fail wrong_kafka "$WORK/wrong-kafka.yaml" "refused the SASL authentication"
conf "$WORK/wrong-pg.yaml" kafka pg-wrong
run_fail wrong_pg "$WORK/wrong-pg.yaml" "password authentication failed for user \"$PG_PASSWORD_ROLE\""
log "ok: a wrong Kafka and a wrong database password each refused, naming what failed"

# ---- files that cannot be used, values in the wrong place ------------------------------
conf "$WORK/missing.yaml" kafka no-such-file
rc=0
"$DEDUPCTL" check -c "$WORK/missing.yaml" --offline >"$WORK/missing.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "check exit code with a missing secret file"
grep -q "missing.yaml:[0-9]*:[0-9]*: 'postgres.conninfo': \${file:$WORK/secrets/no-such-file}: cannot read the secret file: No such file or directory" \
        "$WORK/missing.out" || fail "missing file: $(cat "$WORK/missing.out")"
# a secret where a number belongs: the error locates it and does not echo it
sed "s#^shutdown_timeout_ms: .*#shutdown_timeout_ms: \"\${file:$WORK/secrets/pg}\"#" "$WORK/good.yaml" >"$WORK/misplaced.yaml"
"$DEDUPCTL" check -c "$WORK/misplaced.yaml" --offline >"$WORK/misplaced.out" 2>&1 && fail "a password as shutdown_timeout_ms was accepted"
grep -q "misplaced.yaml:[0-9]*:[0-9]*: 'shutdown_timeout_ms': '(secret)' is not an integer" "$WORK/misplaced.out" ||
        fail "misplaced secret: $(cat "$WORK/misplaced.out")"
timeout 30 "$DEDUPD" -c "$WORK/misplaced.yaml" >"$WORK/misplaced.log" 2>&1 && fail "dedupd accepted it"
chmod 644 "$WORK/secrets/pg"
"$DEDUPCTL" check -c "$WORK/good.yaml" --offline >"$WORK/readable.out" 2>&1 || fail "a world-readable secret file refused: $(cat "$WORK/readable.out")"
grep -q "secret file $WORK/secrets/pg is readable by every user (mode 0644)" "$WORK/readable.out" || fail "no warning: $(cat "$WORK/readable.out")"
log "ok: a missing file named at file:line:column, a misplaced secret not echoed, a world-readable file warned about"

# ---- no output holds a secret -----------------------------------------------------------
n=0
for f in "$WORK"/*.log "$WORK"/*.out; do
        n=$((n + 1))
        for s in "${SECRETS[@]}"; do
                if grep -qF -- "$s" "$f"; then fail "a secret is in $(basename "$f"): $(grep -F -- "$s" "$f" | head -2)"; fi
        done
done
lines=$(cat "$WORK"/*.log "$WORK"/*.out | wc -l)
((lines > 500)) || fail "only $lines lines searched: the debug run logged too little to prove anything"
log "ok: none of 4 secrets in $n outputs ($lines lines)"
