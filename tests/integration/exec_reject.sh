#!/usr/bin/env bash
# host->exec's three classes of failure, end to end through dedupd, with the
# handler guide's stock example (tests/fixtures/sdk/stock.c): a CHECK the
# statement violates is the message's rejection (FAILED with the handler's
# own "out of stock", its change rolled back to the message's savepoint, its
# neighbours applied); a statement failing for another reason (here a
# trigger's RAISE on a withdrawn item) is fatal (logged once per attempt with
# its SQLSTATE, dead-lettered after retry.max_attempts while the rest of its
# batch is applied); a transient failure (a lock held
# by another session, lock_timeout) is retried until it goes away.
. "$(dirname "$0")/lib.sh"

T="stock_$$"
topic "$T" 1
write_config "$WORK/c.yaml" "$T"
sed -i "s#path: \"$BUILD/transfer.so\"#path: \"$BUILD/tests/stock.so\"#" "$WORK/c.yaml"
sed -i 's/^      backoff_max_ms: 500/      backoff_max_ms: 100\n      max_attempts: 3/' "$WORK/c.yaml"
sql "CREATE TABLE stock (sku text PRIMARY KEY, on_hand int NOT NULL CONSTRAINT stock_on_hand_check CHECK (on_hand >= 0))"
sql "INSERT INTO stock VALUES ('A', 2), ('B', 5), ('W', 9)"
sql "CREATE FUNCTION withdrawn() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN RAISE EXCEPTION 'item % is withdrawn', NEW.sku; END \$\$"
sql "CREATE TRIGGER withdrawn BEFORE UPDATE ON stock FOR EACH ROW WHEN (OLD.sku = 'W') EXECUTE FUNCTION withdrawn()"

# Three orders for A (two in stock), one twice; one for the withdrawn W; one for B.
printf '%s\n' '{"order_id":"1","sku":"A"}' '{"order_id":"2","sku":"A"}' '{"order_id":"2","sku":"A"}' \
        '{"order_id":"3","sku":"A"}' '{"order_id":"4","sku":"W"}' '{"order_id":"5","sku":"B"}' | "$KT" produce -t "$T"
start d1 "$WORK/c.yaml"
wait_done "$T"
stop d1
assert_eq "$(sql "SELECT string_agg(sku || '=' || on_hand, ' ' ORDER BY sku) FROM stock")" "A=0 B=4 W=9" "stock after the run"
assert_eq "$(sql "SELECT string_agg(idem_key || ' ' || status || coalesce(': ' || response, ''), ', ' ORDER BY idem_key) FROM dedupd.keys")" \
        "1/PAY DONE, 2/PAY DONE, 3/PAY FAILED: out of stock, 5/PAY DONE" "outcomes"
grep -q "key 3/PAY: statement failed (SQLSTATE 23514: new row for relation \"stock\" violates check constraint \"stock_on_hand_check\"): a constraint: rejected" "$WORK/d1.log" ||
        fail "the rejection is not logged with its SQLSTATE"
assert_eq "$(grep -c "key 4/PAY: statement failed (SQLSTATE P0001: item W is withdrawn): fatal" "$WORK/d1.log")" 3 \
        "attempts logged for the withdrawn item (retry.max_attempts)"
grep -q "offset 4 dead-lettered to $T.dlq: a statement of the handler failed (logged with its SQLSTATE) 3 times" "$WORK/d1.log" ||
        fail "the poison message was not dead-lettered with the reason"
log "ok: a constraint is the message's rejection, a statement failing otherwise dead-letters its message alone"

# A lock another session holds on B, with a lock_timeout: transient, retried until it is released.
printf '%s\n' '{"order_id":"6","sku":"B"}' | "$KT" produce -t "$T"
sed -i "s#conninfo: \"\\(.*\\)\"#conninfo: \"\\1 options='-c lock_timeout=200'\"#" "$WORK/c.yaml"
sed -i 's/^      max_attempts: 3$/      max_attempts: 50/' "$WORK/c.yaml" # a transient failure counts attempts too
grep -q "lock_timeout=200" "$WORK/c.yaml" || fail "no lock_timeout in the config"
# The lock is held until dedupd has met it once, then its session is ended.
PGAPPNAME=locker psql "$TEST_DSN" -X -q -c "BEGIN; SELECT * FROM stock WHERE sku = 'B' FOR UPDATE; SELECT pg_sleep(60)" \
        >/dev/null 2>&1 &
LOCKER=$!
poll 10 bash -c "[[ \$(psql '$TEST_DSN' -X -q -t -A -c \"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'locker' AND wait_event = 'PgSleep'\") -gt 0 ]]" ||
        fail "the locking session did not start"
start d2 "$WORK/c.yaml"
poll 30 grep -q "SQLSTATE 55P03" "$WORK/d2.log" || fail "dedupd never met the lock"
sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'locker'" >/dev/null
wait "$LOCKER" || true
wait_done "$T" 60
stop d2
assert_eq "$(sql "SELECT on_hand FROM stock WHERE sku = 'B'")" 3 "B after the lock was released"
grep -q "key 6/PAY: statement failed (SQLSTATE 55P03: canceling statement due to lock timeout): transient: retried" "$WORK/d2.log" ||
        fail "the lock timeout was not taken as transient: $(grep -c 'statement failed' "$WORK/d2.log") failures logged"
log "PASS"
