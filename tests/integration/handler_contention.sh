#!/usr/bin/env bash
# A handler statement that fails as contention between transactions does (a
# deadlock, a serialization failure: host->exec returns DEDUPD_EXEC_RETRY) is
# no message's doing: the batch runs again whole, no message is charged an
# attempt and the batch is not split. CI caught two partition workers (each
# with the transfer handler) deadlocking, and the batch that lost was split in
# halves and its halves committed apart; one message at a time, each such
# failure cost the message one of its retry.max_attempts, so a few deadlocks
# in a row dead-lettered a good payment.
# 1. set-oriented (the transfer handler's handle_batch): two serialization
#    failures, every payment applied once, nothing split, nothing dead-lettered;
# 2. one message at a time (per_message): the same with retry.max_attempts 2,
#    which two charged attempts would have spent;
#    and the SQL handler, whose pipelined statements run on host->conn and
#    which hands their failures to host->classify (ABI 1.4): the same;
# 3. bounded: a payment whose statement fails so every time (a trigger raising
#    40001 for it) is dead-lettered after retry.max_attempts like any failing
#    message, its neighbours applied.
. "$(dirname "$0")/lib.sh"

# run NAME PER_MESSAGE: 40 payments for 20 users on a fresh topic, drained; the
# handler's config as the transfer handler's with retry.max_attempts 2 (NAME
# sql: the SQL handler running the transfer as one statement, pipelined)
run() {
        local name=$1 per_message=$2
        T="contend_${name}_$$"
        topic "$T" 1
        SEED_ACCOUNTS=20 INITIAL_BALANCE=1000 BATCH_MAX=100 write_config "$WORK/$name.yaml" "$T"
        sed -i "s/^      backoff_max_ms: 500/      backoff_max_ms: 100\n      max_attempts: 2/" "$WORK/$name.yaml"
        if [[ $name == sql ]]; then
                as_sql_handler "$SQL_TRANSFER_STATEMENT" "$per_message" <"$WORK/$name.yaml" >"$WORK/$name.yaml.new"
                mv "$WORK/$name.yaml.new" "$WORK/$name.yaml"
        else
                sed -i "s#^      path: \"$BUILD/transfer.so\"#&\n      per_message: $per_message#" "$WORK/$name.yaml"
        fi
        grep -q "per_message: $per_message" "$WORK/$name.yaml" || fail "config not as expected: $(cat "$WORK/$name.yaml")"
        for i in $(seq 1 40); do
                printf '{"order_id":"%s-%d","user_id":%d,"amount":1}\n' "$name" "$i" $((i % 20 + 1))
        done | "$KT" produce -t "$T"
        start "$name" "$WORK/$name.yaml"
        wait_done "$T" 60
        stop "$name"
        "$KT" dump -t "$T.dlq" >"$WORK/$name.dlq"
}

# The tables first (the handler makes them), then a trigger on the ledger.
SEED_ACCOUNTS=20 write_config "$WORK/setup.yaml" "contend_setup_$$"
"$DEDUPCTL" migrate -c "$WORK/setup.yaml" >/dev/null
sql "CREATE SEQUENCE contention_seq"
sql "CREATE TABLE contention_rule (idem_key text PRIMARY KEY)"
sql "CREATE FUNCTION contend() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN
        IF nextval('contention_seq') <= 2 OR EXISTS (SELECT 1 FROM contention_rule WHERE idem_key = NEW.idem_key) THEN
                RAISE EXCEPTION 'simulated contention on %', NEW.idem_key USING ERRCODE = '40001';
        END IF;
        RETURN NEW;
END \$\$"
sql "CREATE TRIGGER contend BEFORE INSERT ON transfer_ledger FOR EACH ROW EXECUTE FUNCTION contend()"

# applied NAME COUNT: COUNT of NAME's payments in the ledger and DONE, none dead-lettered
applied() {
        assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key LIKE '$1-%'")" "$2" "$1: debits in the ledger"
        assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE idem_key LIKE '$1-%' AND status = 'DONE'")" "$2" \
                "$1: keys DONE"
}

for mode in batch:false single:true sql:false; do
        name=${mode%%:*}
        sql "SELECT setval('contention_seq', 1, false)" >/dev/null
        run "$name" "${mode#*:}"
        applied "$name" 40
        assert_eq "$(grep -c '^  dedupd.reason=' "$WORK/$name.dlq" || true)" 0 "$name: dead letters"
        grep -q "statement failed (SQLSTATE 40001: simulated contention on $name-1/PAY): transient: retried" \
                "$WORK/$name.log" || fail "$name: the serialization failure is not logged: $(grep -c WARN "$WORK/$name.log") warnings"
        grep -q "a statement of the handler met another transaction (a deadlock or a serialization failure)" \
                "$WORK/$name.log" || fail "$name: the batch was not retried as contention: $(grep WARN "$WORK/$name.log" | tail -3)"
        ! grep -q "splitting it" "$WORK/$name.log" || fail "$name: the batch was split: $(grep 'splitting' "$WORK/$name.log")"
        ! grep -q "attempt 1 of 2" "$WORK/$name.log" || fail "$name: a message was charged: $(grep 'attempt 1 of 2' "$WORK/$name.log")"
        log "ok: $name: two serialization failures, 40 of 40 applied, none charged, nothing split"
done

# 3. Every time for one payment: dead-lettered after its attempts, its neighbours applied.
sql "SELECT setval('contention_seq', 1000)" >/dev/null
sql "INSERT INTO contention_rule VALUES ('always-17/PAY')"
run always false
applied always 39
assert_eq "$(grep -c '^  dedupd.reason=' "$WORK/always.dlq")" 1 "always: dead letters"
grep -q '"order_id":"always-17"' "$WORK/always.dlq" || fail "always: the dead letter is not always-17: $(cat "$WORK/always.dlq")"
log "ok: a payment failing so every time dead-lettered after retry.max_attempts, 39 of 39 neighbours applied"
log "PASS"
