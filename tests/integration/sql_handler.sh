#!/usr/bin/env bash
# The SQL handler (handlers/sql): a statement from the config, no C.
# 1. The transfer written as one statement gives, pipelined and one message
#    at a time, exactly what the transfer handler gives: balances, ledger and
#    stored outcomes equal row for row on a random workload where money runs
#    out mid-batch.
# 2. A message lacking a source is rejected with the reason; a message whose
#    statement fails (an SQL error) is retried and dead-lettered alone after
#    retry.max_attempts while the rest of its batch is applied.
# 3. Statements that cannot work are refused at start with the reason.
. "$(dirname "$0")/lib.sh"

DBS=()
on_exit 'for d in "${DBS[@]}"; do psql "$PG_DSN" -X -q -c "DROP DATABASE IF EXISTS \"$d\" WITH (FORCE)" >/dev/null 2>&1; done'
newdb() { # NAME → DSN
        DBS+=("${DB}_$1")
        psql "$PG_DSN" -X -q -c "CREATE DATABASE \"${DB}_$1\"" >/dev/null
        echo "${PG_DSN/dbname=dedupd/dbname=${DB}_$1}"
}

STATEMENT=$SQL_TRANSFER_STATEMENT

# conf FILE DSN TOPIC HANDLER(transfer|sql|sql_permsg) [STATEMENT]
conf() {
        local file=$1 dsn=$2 topic=$3 handler=$4 stmt=${5:-$STATEMENT}
        SEED_ACCOUNTS=20 INITIAL_BALANCE=3000 BATCH_MAX=500 write_config "$file" "$topic"
        sed -i "s#conninfo: \".*\"#conninfo: \"$dsn\"#; s#group.id: \"grp-$ID\"#group.id: \"grp-$ID-$handler\"#" "$file"
        sed -i 's/^      backoff_max_ms: 500/      backoff_max_ms: 100\n      max_attempts: 3/' "$file"
        [[ $handler == transfer ]] && return 0
        as_sql_handler "$stmt" "$([[ $handler == sql_permsg ]] && echo true || echo false)" <"$file" >"$file.new" &&
                mv "$file.new" "$file"
}

# ---- 1. equal to the transfer handler, pipelined and one at a time ----------
T="sqlh_$$"
topic "$T" 2
awk 'BEGIN { srand(20261201);
        for (i = 1; i <= 4000; i++) {
                o = (i <= 2500) ? i : int(rand() * 2500) + 1;
                srand(7919 + o); u = int(rand() * 20) + 1; a = int(rand() * 90) + 1;
                printf "u%d\t{\"order_id\":\"o-%d\",\"user_id\":%d,\"amount\":%d}\n", u, o, u, a;
                srand(20261201 + i);
        } }' >"$WORK/w.txt"  # keyed by user: a user's debits in one partition, in one order for every run
"$KT" produce -t "$T" <"$WORK/w.txt"
for h in transfer sql sql_permsg; do
        dsn=$(newdb "$h")
        conf "$WORK/$h.yaml" "$dsn" "$T" "$h"
        # The statement needs the tables: the transfer handler's setup makes them.
        conf "$WORK/setup.yaml" "$dsn" "$T" transfer
        "$DEDUPCTL" migrate -c "$WORK/setup.yaml" >/dev/null
        drain "$h" "$WORK/$h.yaml" "$dsn" "$T"
        dump_transfer "$dsn" "$WORK/$h"
done
for h in sql sql_permsg; do
        for what in accounts ledger keys; do
                diff "$WORK/transfer.$what" "$WORK/$h.$what" >"$WORK/diff.$what" ||
                        fail "$h: $what differ from the transfer handler's: $(head -n 5 "$WORK/diff.$what")"
        done
done
rejected=$(grep -c '|FAILED|insufficient balance' "$WORK/sql.keys" || true)
((rejected > 100)) || fail "only $rejected rejections: the workload does not test the order"
grep -q "pipelined 256 deep" "$WORK/sql.log" || fail "the SQL handler did not say how it runs: $(head -5 "$WORK/sql.log")"
log "ok: the SQL handler, pipelined and one at a time, equals the transfer handler row for row ($(wc -l <"$WORK/sql.ledger") debits, $rejected rejected)"

# ---- 2. a message without a source; a message whose statement fails ---------
T2="sqlh2_$$"
topic "$T2" 1
{
        for i in $(seq 1 30); do echo "{\"order_id\":\"g-$i\",\"user_id\":$((i % 20 + 1)),\"amount\":1}"; done
        echo '{"order_id":"no-amount","user_id":3}'
        echo '{"order_id":"bad-amount","user_id":3,"amount":"abc"}'
        for i in $(seq 31 60); do echo "{\"order_id\":\"g-$i\",\"user_id\":$((i % 20 + 1)),\"amount\":1}"; done
} | "$KT" produce -t "$T2"
dsn=$(newdb bad)
conf "$WORK/setup.yaml" "$dsn" "$T2" transfer
"$DEDUPCTL" migrate -c "$WORK/setup.yaml" >/dev/null
conf "$WORK/bad.yaml" "$dsn" "$T2" sql
drain bad "$WORK/bad.yaml" "$dsn" "$T2"
q2() { psql "$dsn" -X -t -A -c "$1"; }
assert_eq "$(q2 "SELECT count(*) FROM transfer_ledger WHERE idem_key LIKE 'g-%'")" 60 "good payments applied around the bad ones"
assert_eq "$(q2 "SELECT status || ': ' || response FROM dedupd.keys WHERE idem_key = 'no-amount/PAY'")" \
        "FAILED: json field 'amount' is missing" "a message without a source"
assert_eq "$(q2 "SELECT count(*) FROM dedupd.keys WHERE idem_key = 'bad-amount/PAY'")" 0 "the failing message has no key"
"$KT" dump -t "$T2.dlq" >"$WORK/dlq.txt"
assert_eq "$(grep -c '^  dedupd.reason=' "$WORK/dlq.txt")" 1 "dead letters"
grep -q 'bad-amount' "$WORK/dlq.txt" || fail "dead letter is not the failing message: $(cat "$WORK/dlq.txt")"
grep -q '^  dedupd.reason=handler left the transaction aborted (an SQL error) 3 times' "$WORK/dlq.txt" || fail "dead letter reason: $(cat "$WORK/dlq.txt")"
grep -q 'invalid input syntax for type bigint' "$WORK/bad.log" || fail "the SQL error is not logged: $(tail -5 "$WORK/bad.log")"
log "ok: a missing source rejected with its reason; an SQL error dead-lettered alone after 3 attempts, 60 of 60 good payments applied"

# ---- 3. statements that cannot work are refused at start ----------------------
refused() { # WHY STATEMENT EXPECTED
        conf "$WORK/r.yaml" "$dsn" "$T2" sql "$2"
        local rc=0
        timeout 60 "$DEDUPD" -c "$WORK/r.yaml" >"$WORK/r.log" 2>&1 || rc=$?
        assert_eq "$rc" 2 "dedupd exit code with $1"
        grep -q "$3" "$WORK/r.log" || fail "$1: not explained: $(tail -3 "$WORK/r.log")"
}
refused "no RETURNING" "UPDATE account SET balance = balance WHERE user_id = {json:user_id}::bigint" "end it with RETURNING"
refused "an unknown table" "SELECT 1 FROM no_such_table WHERE x = {json:user_id}" 'does not prepare: ERROR:  relation "no_such_table" does not exist'
refused "a \$1 of its own" "SELECT \$1::int" "a parameter of its own"
refused "an unknown source" "SELECT {json:a..b}" "source {json:a..b}"
log "ok: statements that cannot work refused at start with the reason"
