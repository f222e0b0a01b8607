# Shared helpers for the integration tests: real PostgreSQL, real Kafka.
# Each test gets its own database, topics and consumer group, so tests never
# see each other's rows. Sourced by tests/integration/*.sh. KEEP_WORK=1 keeps
# the test's work directory (configs, dedupd's logs) for a look afterwards.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${DEDUPD_BUILD:-$ROOT/build}
if [[ ! -f $ROOT/.run/env ]]; then
        echo "FAIL: services are not up (no $ROOT/.run/env): run scripts/services up" >&2
        exit 1
fi
# shellcheck disable=SC1091
. "$ROOT/.run/env"

KT="$BUILD/tests/kafkatool"
DEDUPD="$BUILD/dedupd"
DEDUPCTL="$BUILD/dedupctl"
TEST=$(basename "$0" .sh)
ID="$(echo "$TEST" | tr -c 'a-z0-9\n' '_')_$$"
WORK=$(mktemp -d "/tmp/dedupd-$TEST.XXXXXX")
DB="it_$ID"
TEST_DSN="${PG_DSN/dbname=dedupd/dbname=$DB}"
declare -A PIDS=()
FAILED=0

log() { printf '[%s] %s\n' "$TEST" "$*"; }

# hold_lock NAME shared|exclusive: hold .run/locks/NAME until this test's shell
# has exited (its cleanup included). The servers are shared by every test that
# runs at once (ctest -j, and scripts/test runs its suites side by side), so
# each test holds "servers" shared, and one that stops, restarts or
# reconfigures a server for everyone holds it exclusive: it runs alone
# (DEDUPD_TEST_EXCLUSIVE=1, which IT_EXCLUSIVE in tests/integration/CMakeLists.txt
# and EXCLUSIVE_CASES in tests/faults/run set). A test that changes one fixed
# object (a role pg_hba names) holds that object's own lock exclusive. An
# exclusive waiter holds NAME.gate, so those that come after it wait behind it
# instead of starving it. The locks are held by a helper process that lives as
# long as the test's shell, so no child of the test (a dedupd it leaked) keeps them.
hold_lock() {
        local name=$1 mode=-s dir=$ROOT/.run/locks ok="" t0=$SECONDS
        [[ $2 == exclusive ]] && mode=-x
        mkdir -p "$dir"
        read -r ok < <(
                exec 8>>"$dir/$name.gate" 9>>"$dir/$name" </dev/null
                flock -x 8 && flock "$mode" 9 || exit 1
                [[ $mode == -x ]] || flock -u 8
                echo locked
                exec >/dev/null 2>&1
                exec tail --pid=$$ -s 0.2 -f /dev/null # ($$: the test's shell)
        ) || true
        [[ $ok == locked ]] || { echo "FAIL: cannot lock $dir/$name" >&2; exit 1; }
        ((SECONDS - t0 < 2)) || log "waited $((SECONDS - t0)) s for the $2 lock on $name"
}
# (a script a test runs that sources this file again holds what the test holds)
if [[ -z ${DEDUPD_LOCKS_HELD:-} ]]; then
        export DEDUPD_LOCKS_HELD=$$
        if [[ ${DEDUPD_TEST_EXCLUSIVE:-0} == 1 ]]; then hold_lock servers exclusive; else hold_lock servers shared; fi
fi

sql() { psql "$TEST_DSN" -X -q -t -A -v ON_ERROR_STOP=1 -c "$1"; }

EXIT_HOOKS=()
# on_exit CMD: CMD (evaluated) runs when the test ends, after its processes
# are killed and before its database is dropped. A test adds what it must undo
# here, never with a trap of its own: a trap that runs anything before cleanup
# loses the test's exit status, and a failed test passes.
on_exit() { EXIT_HOOKS+=("$1"); }

cleanup() {
        local rc=$? hook
        ((rc != 0 || FAILED == 0)) || rc=1
        for name in "${!PIDS[@]}"; do
                kill -9 "${PIDS[$name]}" 2>/dev/null || true
        done
        for hook in "${EXIT_HOOKS[@]}"; do
                eval "$hook" || true
        done
        if [[ $rc -ne 0 || $FAILED -ne 0 ]]; then
                for f in "$WORK"/*.log; do
                        [[ -f $f ]] || continue
                        echo "---- last lines of $f"
                        tail -n 30 "$f"
                done
        fi
        psql "$PG_DSN" -X -q -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" >/dev/null 2>&1 || true
        [[ -n ${KEEP_WORK:-} ]] || rm -rf "$WORK"
        exit $rc
}
trap cleanup EXIT

psql "$PG_DSN" -X -q -c "CREATE DATABASE \"$DB\"" >/dev/null

fail() {
        echo "FAIL: $*" >&2
        FAILED=1
        exit 1
}

# assert_eq ACTUAL EXPECTED WHAT
assert_eq() {
        if [[ "$1" != "$2" ]]; then
                fail "$3: expected '$2', got '$1'"
        fi
        log "ok: $3 = $1"
}

# require_fault_points: for tests that arm DEDUPD_FAULT; a build without fault
# points ignores it and would never stop where the test expects
require_fault_points() {
        "$DEDUPD" --version | grep -q '^fault points: compiled in' ||
                fail "$DEDUPD has no fault points: configure its build with -DDEDUPD_FAULT_POINTS=ON"
}

# topic NAME PARTITIONS: create the topic and its dead-letter topic
topic() {
        "$KT" create -t "$1" -p "$2" >/dev/null
        "$KT" create -t "$1.dlq" -p 1 >/dev/null
}

# free_port: a port nothing listens on, for a server a test starts itself
free_port() {
        local p
        for ((i = 0; i < 100; i++)); do
                p=$((20000 + RANDOM % 20000))
                (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
        done
        fail "no free port"
}

# config_head: the top of every test config (namespace, logs, the database)
config_head() {
        cat <<EOF
namespace: it-$ID
log_level: ${LOG_LEVEL:-info}
shutdown_timeout_ms: 15000
postgres:
  conninfo: "$TEST_DSN"
  retry_max_ms: 1000
EOF
        # The workers tests (CMakeLists: IT_WORKERS) set it; absent, no line
        # moves (tests name config lines in what they expect).
        [[ -z ${WORKERS:-} ]] || echo "workers: $WORKERS"
}

# transfer_topic NAME [SUBJECT]: a topics[] entry running the transfer handler
# on NAME (a topic, queue or subject), keyed by SUBJECT/PAY ({json:order_id})
transfer_topic() {
        local subject=${2:-}
        [[ -n $subject ]] || subject='{json:order_id}'
        cat <<EOF
  - name: $1
    key:
      subject: "$subject"
      action: PAY
    handler:
      path: "$BUILD/transfer.so"
      config:
        seed_accounts: "${SEED_ACCOUNTS:-100}"
        initial_balance: "${INITIAL_BALANCE:-1000}"
    batch:
      max_messages: ${BATCH_MAX:-200}
      max_wait_ms: 20
    retry:
      backoff_ms: 50
      backoff_max_ms: 500
EOF
}

# write_config FILE TOPIC [EXTRA_TOPIC_YAML]: a config for the transfer handler
write_config() {
        local file=$1 t=$2 extra=${3:-}
        cat >"$file" <<EOF
$(config_head)
kafka:
  bootstrap.servers: "$KAFKA_BOOTSTRAP"
  group.id: "grp-$ID"
  session.timeout.ms: "6000"
  heartbeat.interval.ms: "500"
  topic.metadata.refresh.interval.ms: "2000"
topics:
$(transfer_topic "$t")
$extra
EOF
}

# start NAME CONFIG: run dedupd in the background, log to $WORK/NAME.log (there
# at once: the background job opens it when it runs, and a test that reads the
# log right away, $(sed ... NAME.log) under set -e, would end on a missing file)
start() {
        : >>"$WORK/$1.log"
        "$DEDUPD" -c "$2" >>"$WORK/$1.log" 2>&1 &
        PIDS[$1]=$!
}

# stop NAME: SIGTERM, expect exit 0
stop() {
        local pid=${PIDS[$1]} rc=0
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" || rc=$?
        unset "PIDS[$1]"
        [[ $rc -eq 0 ]] || fail "dedupd $1 exited $rc after SIGTERM"
}

# crash NAME: SIGKILL, no cleanup at all
crash() {
        kill -9 "${PIDS[$1]}" 2>/dev/null || true
        wait "${PIDS[$1]}" 2>/dev/null || true
        unset "PIDS[$1]"
}

# produced TOPIC: number of records in the topic
produced() { "$KT" offsets -t "$1" | awk '$1=="total"{print $2}'; }

# progressed TOPIC [DSN]: sum of the database's (the test's, or DSN's) next offsets (all partitions start at 0)
progressed() {
        psql "${2:-$TEST_DSN}" -X -q -t -A -c "SELECT coalesce(sum(next_offset),0) FROM dedupd.offsets WHERE topic = '$1'" 2>/dev/null || echo 0
}

# poll SECONDS CMD...: until CMD succeeds (0), or SECONDS have passed (1). It
# looks at once, then after 50 ms, the pause growing to half a second: a long
# wait costs two looks a second, not ten (each look a psql or a rabbitmqctl, a
# process and a connection, which the other tests running beside it feel).
poll() {
        local end=$((SECONDS + $1)) ms=50
        shift
        until "$@"; do
                ((SECONDS < end)) || return 1
                sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
                ((ms = ms * 3 / 2, ms > 500)) && ms=500
        done
        return 0
}

# is_progressed TOPIC WANT [DSN]: the database (the test's, or DSN's) has progressed over WANT records; GOT is how far
is_progressed() {
        GOT=$(progressed "$1" "${3:-}")
        [[ $GOT == "$2" ]]
}

# wait_progressed TOPIC WANT [SECONDS]: until the database has progressed over WANT records of TOPIC
wait_progressed() {
        poll "${3:-120}" is_progressed "$1" "$2" || fail "timed out: database progressed $GOT of $2 records of $1"
}

# wait_done TOPIC [SECONDS]: until the database has progressed over every record
wait_done() { wait_progressed "$1" "$(produced "$1")" "${2:-120}"; }

# drain NAME CONFIG DSN TOPIC: run dedupd until the database behind DSN (a
# test's second or third database) has progressed over every record, then stop it
drain() {
        local want rc=0
        start "$1" "$2"
        want=$(produced "$4")
        poll 60 is_progressed "$4" "$want" "$3" || rc=$?
        stop "$1"
        ((rc == 0)) || fail "$1: progressed $GOT of $want"
}

# dump_transfer DSN PREFIX: balances, ledger and stored outcomes, sorted, into
# PREFIX.accounts, PREFIX.ledger, PREFIX.keys (to compare two runs row for row)
dump_transfer() {
        psql "$1" -X -q -t -A -c "SELECT user_id, balance FROM account ORDER BY 1" >"$2.accounts"
        psql "$1" -X -q -t -A -c "SELECT idem_key, user_id, amount FROM transfer_ledger ORDER BY idem_key" >"$2.ledger"
        psql "$1" -X -q -t -A -c "SELECT idem_key, status, response FROM dedupd.keys ORDER BY idem_key" >"$2.keys"
}

# wait_assigned NAME TOPIC: until dedupd NAME's log shows an assignment of TOPIC (30 s at most)
wait_assigned() {
        for ((i = 0; i < 300; i++)); do grep -q "assigned $2/" "$WORK/$1.log" 2>/dev/null && return 0; sleep 0.1; done
        fail "$1 never got partitions of $2"
}

# verify_caught_up CONFIG: dedupctl verify --expect-caught-up exits 0
verify_caught_up() {
        "$DEDUPCTL" verify -c "$1" --expect-caught-up >"$WORK/verify.out" 2>&1 ||
                { cat "$WORK/verify.out"; fail "dedupctl verify --expect-caught-up exited non-zero"; }
        log "ok: dedupctl verify --expect-caught-up: $(tail -n 1 "$WORK/verify.out")"
}

# kafka_lag TOPIC: lag of the test's group as Kafka sees it
kafka_lag() { "$KT" offsets -t "$1" -g "grp-$ID" | awk '$1=="total"{print $4}'; }

# check_invariants EXPECTED_KEYS_FILE: the guarantee, checked independently of dedupd's counters.
# Every distinct key produced has exactly one ledger row (DONE) or none and a FAILED record;
# no key is missing; no key has two effects; balances add up.
check_invariants() {
        local keys=$1
        sql "CREATE TABLE expected (idem_key text PRIMARY KEY)"
        psql "$TEST_DSN" -X -q -v ON_ERROR_STOP=1 -c "\\copy expected FROM '$keys'"
        assert_eq "$(sql "SELECT count(*) FROM expected e LEFT JOIN dedupd.keys k USING (idem_key) WHERE k.idem_key IS NULL")" 0 "produced keys with no record"
        assert_eq "$(sql "SELECT count(*) FROM (SELECT idem_key FROM transfer_ledger GROUP BY idem_key HAVING count(*) > 1) d")" 0 "keys with more than one effect"
        assert_eq "$(sql "SELECT count(*) FROM dedupd.keys k WHERE status = 'DONE' AND NOT EXISTS (SELECT 1 FROM transfer_ledger l WHERE l.idem_key = k.idem_key)")" 0 "DONE keys without an effect"
        assert_eq "$(sql "SELECT count(*) FROM dedupd.keys k WHERE status = 'FAILED' AND EXISTS (SELECT 1 FROM transfer_ledger l WHERE l.idem_key = k.idem_key)")" 0 "FAILED keys with an effect"
        assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE status NOT IN ('DONE','FAILED')")" 0 "keys left PENDING"
        assert_eq "$(sql "SELECT count(*) FROM transfer_ledger l WHERE NOT EXISTS (SELECT 1 FROM expected e WHERE e.idem_key = l.idem_key)")" 0 "effects for keys never produced"
        assert_eq "$(sql "SELECT sum(a.balance) + (SELECT coalesce(sum(amount),0) FROM transfer_ledger) = count(*) * ${INITIAL_BALANCE:-1000} FROM account a")" t "balances plus debits equal the initial total"
}

# workload FILE KEYSFILE [MESSAGES] [ORDERS]: a payment workload with duplicates.
# Every order appears once, then random orders again until MESSAGES; the same
# order always carries the same payload (a redelivery, not a new request).
# Users 1..50, amounts 10..70: with 1000 each, many orders are rejected.
workload() {
        local file=$1 keys=$2 msgs=${3:-10000} orders=${4:-7000}
        awk -v m="$msgs" -v o="$orders" 'BEGIN {
                srand(20261129);
                for (i = 1; i <= m; i++) {
                        n = (i <= o) ? i : int(rand() * o) + 1;
                        printf "{\"order_id\":\"o-%d\",\"user_id\":%d,\"amount\":%d}\n", n, n % 50 + 1, (n % 7 + 1) * 10;
                }
        }' | shuf --random-source=<(yes) >"$file"
        seq 1 "$orders" | sed 's#^#o-#; s#$#/PAY#' >"$keys"
}

# metrics_addr LOGNAME: where dedupd LOGNAME serves /metrics (http.listen port 0), read from its log.
metrics_addr() {
        local a
        for ((i = 0; i < 100; i++)); do
                a=$(sed -n 's#.*serving /metrics, /healthz and /readyz on http://\([0-9.:]*\).*#\1#p' "$WORK/$1.log")
                [[ -n $a ]] && { echo "$a"; return; }
                sleep 0.1
        done
        fail "dedupd $1 did not say where it serves /metrics"
}

# The SQL handler's statement that has the transfer handler's effect (debit, ledger row, "OK: debited N").
SQL_TRANSFER_STATEMENT='WITH d AS (UPDATE account SET balance = balance - {json:amount}::bigint
                  WHERE user_id = {json:user_id}::bigint AND balance >= {json:amount}::bigint
                  RETURNING user_id)
        INSERT INTO transfer_ledger (idem_key, user_id, amount)
        SELECT {idem_key}, user_id, {json:amount}::bigint FROM d
        RETURNING '"'"'OK: debited '"'"' || amount'

# as_sql_handler STATEMENT [PER_MESSAGE]: the config on stdin with each topic's handler the SQL
# handler running STATEMENT (rejecting "insufficient balance"), on stdout
as_sql_handler() {
        awk -v so="$BUILD/sql.so" -v pm="${2:-}" -v st="$1" '
                /^    handler:/ { print; print "      path: \"" so "\""; if (pm != "") print "      per_message: " pm;
                        print "      config:"; print "        reject: insufficient balance";
                        print "        statement: |"; n = split(st, l, "\n");
                        for (i = 1; i <= n; i++) print "          " l[i]; skip = 1; next }
                skip && /^    [a-z]/ { skip = 0 }
                !skip { print }'
}
