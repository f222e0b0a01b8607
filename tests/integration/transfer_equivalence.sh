#!/usr/bin/env bash
# The transfer handler's set-oriented handle_batch (a constant number of
# statements per batch) has exactly the outcome of applying the messages one
# after another: random workloads — small balances, several debits of one
# account in one batch where only the first ones fit, duplicates, malformed
# payments — go once through handle_batch and once through handle()
# (handler.per_message), and balances, ledgers and stored outcomes must be
# equal row for row.
. "$(dirname "$0")/lib.sh"

DB2="${DB}_pm"
psql "$PG_DSN" -X -q -c "CREATE DATABASE \"$DB2\"" >/dev/null
on_exit 'psql "$PG_DSN" -X -q -c "DROP DATABASE IF EXISTS \"$DB2\" WITH (FORCE)" >/dev/null 2>&1'
DSN2="${PG_DSN/dbname=dedupd/dbname=$DB2}"

# workload SEED FILE: 4000 payments for 2500 orders over 20 accounts of 3000
gen() {
        awk -v seed="$1" 'BEGIN { srand(seed);
                for (i = 1; i <= 4000; i++) {
                        o = (i <= 2500) ? i : int(rand() * 2500) + 1;
                        srand(seed * 7919 + o); u = int(rand() * 20) + 1; a = int(rand() * 90) + 1;
                        if (o % 97 == 0) printf "{\"order_id\":\"o-%d\",\"user_id\":\"x\",\"amount\":1}\n", o;
                        else printf "{\"order_id\":\"o-%d\",\"user_id\":%d,\"amount\":%d}\n", o, u, a;
                        srand(seed + i);
                } }' >"$2"
}

# run NAME DSN PER_MESSAGE TOPIC
run() {
        SEED_ACCOUNTS=20 INITIAL_BALANCE=3000 BATCH_MAX=500 write_config "$WORK/$1.yaml" "$4"
        sed -i "s#conninfo: \".*\"#conninfo: \"$2\"#; s#group.id: \"grp-$ID\"#group.id: \"grp-$ID-$1\"#" "$WORK/$1.yaml"
        sed -i "/^    handler:/a\\      per_message: $3" "$WORK/$1.yaml"
        drain "$1" "$WORK/$1.yaml" "$2" "$4"
}

for seed in 20261201 $((RANDOM * 32768 + RANDOM)); do
        T="equiv_${seed}_$$"
        topic "$T" 1
        gen "$seed" "$WORK/w.txt"
        "$KT" produce -t "$T" <"$WORK/w.txt"
        psql "$TEST_DSN" -X -q -c "DROP SCHEMA IF EXISTS dedupd CASCADE; DROP TABLE IF EXISTS account, transfer_ledger" 2>/dev/null
        psql "$DSN2" -X -q -c "DROP SCHEMA IF EXISTS dedupd CASCADE; DROP TABLE IF EXISTS account, transfer_ledger" 2>/dev/null
        run batch "$TEST_DSN" false "$T"
        run permsg "$DSN2" true "$T"
        dump_transfer "$TEST_DSN" "$WORK/batch"
        dump_transfer "$DSN2" "$WORK/permsg"
        for what in accounts ledger keys; do
                diff "$WORK/batch.$what" "$WORK/permsg.$what" >"$WORK/diff.$what" ||
                        fail "seed $seed: $what differ between handle_batch and handle(): $(head -n 5 "$WORK/diff.$what")"
        done
        rejected=$(grep -c '|FAILED|insufficient balance' "$WORK/batch.keys" || true)
        invalid=$(grep -c '|FAILED|invalid payment' "$WORK/batch.keys" || true)
        ((rejected > 100)) || fail "seed $seed: only $rejected rejections: the workload does not test the order"
        log "ok: seed $seed: $(wc -l <"$WORK/batch.ledger") debits, $rejected rejected for the balance, $invalid invalid — equal row for row"
done
