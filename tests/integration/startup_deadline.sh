#!/usr/bin/env bash
# Startup fails fast and says why: a database that takes connections and
# never answers (a hung or black-holed host: without connect_timeout libpq
# would wait for the kernel's TCP retries, minutes), a database port that
# refuses, a broker that is down, a group that never hands out an
# assignment — dedupd exits 1 within startup_timeout_ms with one ERROR line
# naming what it waited for, and dedupctl check exits 2 naming it, without
# ever showing the password.
. "$(dirname "$0")/lib.sh"

T="pay_startup_$$"
topic "$T" 1
write_config "$WORK/good.yaml" "$T"

# with_startup FILE MS SED: the good config with startup_timeout_ms MS, edited by SED, into FILE
with_startup() { sed -e "s/^shutdown_timeout_ms:/startup_timeout_ms: $2\nshutdown_timeout_ms:/" -e "$3" "$WORK/good.yaml" >"$1"; }

# expect_startup_failure NAME CONFIG MAX_S WANT...: dedupd exits 1 within MAX_S
# seconds, with exactly one ERROR line holding every WANT, never the password
expect_startup_failure() {
        local name=$1 cfg=$2 max=$3 rc=0 t0 ms err
        shift 3
        t0=$(date +%s%N)
        timeout 120 "$DEDUPD" -c "$cfg" >"$WORK/$name.log" 2>&1 || rc=$?
        ms=$((($(date +%s%N) - t0) / 1000000))
        assert_eq "$rc" 1 "$name: dedupd exit code"
        ((ms < max * 1000)) || fail "$name: dedupd took $ms ms (at most $max s)"
        assert_eq "$(grep -c ' ERROR ' "$WORK/$name.log" || true)" 1 "$name: ERROR lines"
        err=$(grep ' ERROR ' "$WORK/$name.log")
        for w in "$@"; do
                [[ $err == *"$w"* ]] || fail "$name: the ERROR line lacks '$w': $err"
        done
        if grep -q S3cretXYZ "$WORK/$name.log"; then fail "$name: the password reached the log"; fi
        if grep -q "assigned" "$WORK/$name.log"; then fail "$name: joined the group anyway"; fi
        log "ok: $name: exit 1 after $ms ms: ${err#* ERROR  }"
}

# expect_check_failure NAME CONFIG MAX_S WANT...: dedupctl check exits 2 within MAX_S, naming it
expect_check_failure() {
        local name=$1 cfg=$2 max=$3 rc=0 t0 ms
        shift 3
        t0=$(date +%s%N)
        timeout 120 "$DEDUPCTL" check -c "$cfg" >"$WORK/$name.out" 2>&1 || rc=$?
        ms=$((($(date +%s%N) - t0) / 1000000))
        assert_eq "$rc" 2 "$name: dedupctl check exit code"
        ((ms < max * 1000)) || fail "$name: check took $ms ms (at most $max s)"
        for w in "$@"; do
                grep -qF -- "$w" "$WORK/$name.out" || fail "$name: check output lacks '$w': $(cat "$WORK/$name.out")"
        done
        if grep -q S3cretXYZ "$WORK/$name.out"; then fail "$name: check printed the password"; fi
        log "ok: $name: check exit 2 after $ms ms"
}

# 1. A database that accepts and never answers: connect_timeout (10 s by
#    default) ends each attempt, the deadline the whole wait.
"$BUILD/tests/blackhole" 120 >"$WORK/hole.port" &
PIDS[hole]=$!
for ((i = 0; i < 50; i++)); do [[ -s $WORK/hole.port ]] && break; sleep 0.1; done
HOLE=$(cat "$WORK/hole.port")
[[ $HOLE =~ ^[0-9]+$ ]] || fail "blackhole gave no port"
with_startup "$WORK/hole.yaml" 15000 "s#conninfo: \".*\"#conninfo: \"host=127.0.0.1 port=$HOLE dbname=$DB user=u password=S3cretXYZ\"#"
expect_startup_failure hole "$WORK/hole.yaml" 40 "startup: gave up after 15000 ms (startup_timeout_ms)" \
        "waiting for the database 127.0.0.1:$HOLE/$DB" "timeout expired"
expect_check_failure hole_check "$WORK/hole.yaml" 30 "cannot connect to the database 127.0.0.1:$HOLE/$DB" "timeout expired"

# 2. A database port that refuses: retried, with backoff, until the deadline.
with_startup "$WORK/refused.yaml" 5000 "s#conninfo: \".*\"#conninfo: \"host=127.0.0.1 port=1 dbname=$DB user=u password=S3cretXYZ\"#"
expect_startup_failure refused "$WORK/refused.yaml" 30 "waiting for the database 127.0.0.1:1/$DB" "Connection refused"
grep -q "WARN  \[dedupd\] database unavailable: 127.0.0.1:1/$DB: " "$WORK/refused.log" || fail "the wait was not reported"

# 3. A broker that is down: named by its bootstrap.servers, with librdkafka's reason.
with_startup "$WORK/nobroker.yaml" 12000 "s#bootstrap.servers: \".*\"#bootstrap.servers: \"127.0.0.1:1\"#"
expect_startup_failure nobroker "$WORK/nobroker.yaml" 40 "waiting for the broker: cannot reach the Kafka broker(s) at 127.0.0.1:1 (bootstrap.servers)" \
        "Connection refused"
expect_check_failure nobroker_check "$WORK/nobroker.yaml" 30 "cannot reach the Kafka broker(s) at 127.0.0.1:1 (bootstrap.servers)"
# ... located at bootstrap.servers in the file
grep -q "nobroker.yaml:[0-9]*:[0-9]*: cannot reach" "$WORK/nobroker_check.out" || fail "not located: $(cat "$WORK/nobroker_check.out")"

# 4. A group that hands out no assignment in time: a member killed -9 stays
#    in the group until its session.timeout.ms (30 s here) ends, and the
#    newcomer's join waits for it.
sed 's/session.timeout.ms: "6000"/session.timeout.ms: "30000"/' "$WORK/good.yaml" >"$WORK/long.yaml"
start a "$WORK/long.yaml"
for ((i = 0; i < 300; i++)); do grep -q "assigned $T/0" "$WORK/a.log" && break; sleep 0.1; done
grep -q "assigned $T/0" "$WORK/a.log" || fail "the first member got no assignment"
crash a
sed "s/^shutdown_timeout_ms:/startup_timeout_ms: 8000\nshutdown_timeout_ms:/" "$WORK/long.yaml" >"$WORK/join.yaml"
expect_startup_failure join "$WORK/join.yaml" 25 "startup: no assignment from consumer group grp-$ID within 8000 ms (startup_timeout_ms)" \
        "127.0.0.1:" "(bootstrap.servers)"

# The good config still passes check, with the database named.
"$DEDUPCTL" check -c "$WORK/good.yaml" >"$WORK/check.out" 2>&1 || fail "check of the good config: $(cat "$WORK/check.out")"
grep -q "^database 127.0.0.1:[0-9]*/$DB: connected" "$WORK/check.out" || fail "check did not name the database: $(cat "$WORK/check.out")"
log "ok: a reachable broker and database pass check"
