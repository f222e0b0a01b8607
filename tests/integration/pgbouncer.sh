#!/usr/bin/env bash
# dedupd behind a real PgBouncer (issue 17), run once per pool mode:
#   pgbouncer.sh session | transaction
# The seed's workload (payments with duplicates) on two topics — one through
# the transfer handler, one through the SQL handler — with dedupd killed -9
# mid-run and restarted, then the pooler restarted mid-run (every client cut
# off). Every order debited exactly once per topic, balances exactly what the
# distinct orders make, dedupd.offsets at the end of both topics, exit 0 on
# SIGTERM; and another client sharing the pooler can write throughout
# (nothing dedupd sets reaches another client's transactions).
. "$(dirname "$0")/lib.sh"

MODE=${1:-}
[[ $MODE == session || $MODE == transaction ]] || fail "usage: pgbouncer.sh session|transaction"
PGB=$(mktemp -d "/tmp/dedupd-pgbouncer.XXXXXX") # its own: $WORK is private, the pooler runs as PostgreSQL's user
on_exit '"$DEDUPD_SERVICES" pgbouncer-down "$PGB" 2>/dev/null; [[ -n ${KEEP_WORK:-} ]] || rm -rf "$PGB"'
PGB_PORT=$("$DEDUPD_SERVICES" pgbouncer-up "$PGB" "$MODE") || fail "pgbouncer-up $MODE failed"
POOLED_DSN="${TEST_DSN/port=$PGPORT/port=$PGB_PORT}"
[[ $POOLED_DSN != "$TEST_DSN" ]] || fail "cannot point the DSN at the pooler: $TEST_DSN"
log "PgBouncer ($MODE pooling) on port $PGB_PORT"

TA="pgb_transfer_$$" TB="pgb_sql_$$"
topic "$TA" 4
topic "$TB" 4
# Balances large enough that no debit is refused: each account's balance is
# then exactly what its distinct orders make, whatever the order of applying.
export SEED_ACCOUNTS=50 INITIAL_BALANCE=1000000 BATCH_MAX=10 # small batches: many transactions
workload "$WORK/a.txt" "$WORK/keys.txt" 3000 2000
sed -E 's/^(.*"user_id":([0-9]+).*)$/u\2\t\1/' "$WORK/a.txt" >"$WORK/a.keyed" # keyed by user: spread over the partitions
sed 's/"o-/"s-/' "$WORK/a.keyed" >"$WORK/b.keyed"
"$KT" produce -t "$TA" <"$WORK/a.keyed"
"$KT" produce -t "$TB" <"$WORK/b.keyed"

write_config "$WORK/setup.yaml" "$TA"
sed -i "s#conninfo: \".*\"#conninfo: \"$POOLED_DSN\"#" "$WORK/setup.yaml"
{
        cat "$WORK/setup.yaml"
        transfer_topic "$TB" | as_sql_handler "$SQL_TRANSFER_STATEMENT"
} >"$WORK/c.yaml"
# The tables the SQL handler's statement needs, made by the transfer handler's setup, through the pooler.
"$DEDUPCTL" migrate -c "$WORK/setup.yaml" >"$WORK/migrate.log" 2>&1 || fail "dedupctl migrate through PgBouncer: $(tail -3 "$WORK/migrate.log")"
"$DEDUPCTL" check -c "$WORK/c.yaml" >"$WORK/check.log" 2>&1 || fail "dedupctl check through PgBouncer: $(tail -5 "$WORK/check.log")"
grep -q "behind a connection pooler" "$WORK/check.log" || fail "dedupctl check did not see the pooler: $(cat "$WORK/check.log")"
if [[ $MODE == transaction ]]; then # statement pooling cannot hold a batch: refused, with the reason
        STMT=$(mktemp -d "/tmp/dedupd-pgbouncer.XXXXXX")
        on_exit '"$DEDUPD_SERVICES" pgbouncer-down "$STMT" 2>/dev/null; rm -rf "$STMT"'
        port=$("$DEDUPD_SERVICES" pgbouncer-up "$STMT" statement 2>/dev/null) || fail "pgbouncer-up statement failed"
        sed "s#port=$PGB_PORT#port=$port#" "$WORK/c.yaml" >"$WORK/stmt.yaml"
        rc=0
        "$DEDUPCTL" check -c "$WORK/stmt.yaml" >"$WORK/stmt.log" 2>&1 || rc=$?
        assert_eq "$rc" 1 "dedupctl check exit code behind statement pooling"
        grep -q "needs session or transaction pooling" "$WORK/stmt.log" || fail "statement pooling not explained: $(cat "$WORK/stmt.log")"
        "$DEDUPD_SERVICES" pgbouncer-down "$STMT" 2>/dev/null
fi

# Another application on the same pooler, writing in autocommit all along
# (its connection refused while the pooler restarts: that is not counted).
sql "CREATE TABLE neighbour (id serial PRIMARY KEY, ok boolean)"
neighbour() {
        while [[ ! -f $WORK/neighbour.stop ]]; do
                psql "$POOLED_DSN" -X -q -t -A -c "INSERT INTO neighbour (ok) SELECT current_setting('default_transaction_read_only') = 'off'" \
                        >>"$WORK/neighbour.log" 2>&1 || true
                sleep 0.05
        done
}
neighbour &
PIDS[neighbour]=$!

total() { echo $(($(progressed "$TA") + $(progressed "$TB"))); }
wait_total() { # N: until both topics together have progressed over N records
        for ((i = 0; i < 600; i++)); do
                (($(total) >= $1)) && return 0
                kill -0 "${PIDS[d1]}" 2>/dev/null || fail "dedupd exited after $(total) of $1 records"
                sleep 0.1
        done
        fail "timed out: $(total) of $1 records committed"
}

start d1 "$WORK/c.yaml"
wait_total 1500
crash d1
log "kill -9 after $(total) of 6000 records committed"
start d1 "$WORK/c.yaml"
wait_total 3500
"$DEDUPD_SERVICES" pgbouncer-restart "$PGB" 2>>"$WORK/pgbouncer.log" || fail "pgbouncer-restart"
log "PgBouncer restarted after $(total) of 6000 records committed"
wait_done "$TA" 60
wait_done "$TB" 60
stop d1
touch "$WORK/neighbour.stop"
wait "${PIDS[neighbour]}" || true
unset "PIDS[neighbour]"

# The guarantee, on both topics.
# The guarantee on both topics: every order once, nothing missing, nothing doubled.
{ cat "$WORK/keys.txt"; sed 's/^o-/s-/' "$WORK/keys.txt"; } >"$WORK/all_keys.txt"
check_invariants "$WORK/all_keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'DONE'")" 4000 "orders applied (2000 a topic)"
# Each account: the initial balance less its distinct orders, once per topic.
assert_eq "$(sql "SELECT count(*) FROM account a FULL JOIN (SELECT n % 50 + 1 AS user_id, $INITIAL_BALANCE - 2 * sum((n % 7 + 1) * 10) AS balance
                 FROM generate_series(1, 2000) n GROUP BY 1) e USING (user_id) WHERE a.balance IS DISTINCT FROM e.balance")" 0 \
        "accounts whose balance is not exactly what their distinct orders make"
for t in "$TA" "$TB"; do
        "$KT" offsets -t "$t" | awk '$1 ~ /^[0-9]+$/ && $3 > 0 {print $1 "|" $3}' | sort >"$WORK/end.$t"
        sql "SELECT partition || '|' || next_offset FROM dedupd.offsets WHERE topic = '$t' ORDER BY 1" >"$WORK/db.$t"
        diff "$WORK/end.$t" "$WORK/db.$t" >/dev/null || fail "$t: dedupd.offsets $(tr '\n' ' ' <"$WORK/db.$t") is not the end of the topic $(tr '\n' ' ' <"$WORK/end.$t")"
        assert_eq "$(kafka_lag "$t")" 0 "Kafka consumer lag on $t"
done
log "ok: dedupd.offsets at the end of both topics"
assert_eq "$(grep -c 'read-only transaction' "$WORK/neighbour.log" || true)" 0 "another client's writes refused as read-only"
assert_eq "$(sql "SELECT count(*) FILTER (WHERE NOT ok) || ' of ' || sign(count(*)) FROM neighbour")" "0 of 1" "another client's writes that saw dedupd's read-only default"
