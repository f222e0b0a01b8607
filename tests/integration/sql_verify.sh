#!/usr/bin/env bash
# dedupctl verify with the SQL handler: its `evidence` setting
# ({table, key_column}) declares at start where its effects are counted
# (host->set_evidence, dedupd.evidence), so verify checks them as it does the
# transfer handler's: no anomaly after a run with duplicates and rejections,
# then a planted second effect and a DONE key whose effect vanished named. A
# setting that names no table is refused at start with the reason; without
# the setting verify says it checks keys, counters and lag only.
. "$(dirname "$0")/lib.sh"

T="sqlv_$$"
topic "$T" 2
SEED_ACCOUNTS=5 INITIAL_BALANCE=100 write_config "$WORK/setup.yaml" "$T"
"$DEDUPCTL" migrate -c "$WORK/setup.yaml" >/dev/null # the transfer handler's tables, for the statement
sql "DELETE FROM dedupd.evidence" # what the transfer handler declared: the SQL handler's row is under test
# conf FILE [EVIDENCE_YAML]: the SQL handler, with the evidence setting when given
conf() {
        SEED_ACCOUNTS=5 INITIAL_BALANCE=100 write_config "$1" "$T"
        as_sql_handler "$SQL_TRANSFER_STATEMENT" <"$1" >"$1.new" && mv "$1.new" "$1"
        [[ -z ${2:-} ]] || sed -i "s/^      config:$/      config:\n        evidence: $2/" "$1"
}
conf "$WORK/c.yaml" "{table: transfer_ledger, key_column: idem_key}"
grep -q "evidence: {table: transfer_ledger" "$WORK/c.yaml" || fail "the config has no evidence setting"

for i in $(seq 1 40); do
        u=$((i % 5 + 1))
        printf 'u%d\t{"order_id":"o-%d","user_id":%d,"amount":30}\n' "$u" "$i" "$u"
        ((i % 4)) || printf 'u%d\t{"order_id":"o-%d","user_id":%d,"amount":30}\n' "$u" "$i" "$u" # a duplicate
done >"$WORK/w.txt"
"$KT" produce -t "$T" <"$WORK/w.txt"
start d1 "$WORK/c.yaml"
wait_done "$T"
stop d1
grep -q "topic $T: dedupctl verify counts its effects in transfer_ledger(idem_key)" "$WORK/d1.log" ||
        fail "the SQL handler did not declare its evidence"
assert_eq "$(sql "SELECT handler || ' ' || table_name || '(' || key_column || ')' FROM dedupd.evidence WHERE topic = '$T'")" \
        "sql transfer_ledger(idem_key)" "the evidence declared"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'FAILED'")" 25 "keys rejected (5 accounts of 100, 30 a debit)"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 15 "effects"

rc=0; "$DEDUPCTL" verify -c "$WORK/c.yaml" --expect-caught-up >"$WORK/verify1.out" 2>&1 || rc=$?
cat "$WORK/verify1.out"
assert_eq "$rc" 0 "verify exit code"
grep -qF "  transfer_ledger (handler sql, topic $T)" "$WORK/verify1.out" || fail "verify did not check transfer_ledger"
grep -q "^no anomaly" "$WORK/verify1.out" || fail "verify printed no verdict"

K=$(sql "SELECT idem_key FROM transfer_ledger ORDER BY idem_key LIMIT 1")
D=$(sql "SELECT idem_key FROM transfer_ledger WHERE idem_key <> '$K' ORDER BY idem_key LIMIT 1")
sql "INSERT INTO transfer_ledger (idem_key, user_id, amount) SELECT idem_key, user_id, amount FROM transfer_ledger WHERE idem_key = '$K'"
sql "DELETE FROM transfer_ledger WHERE idem_key = '$D'"
rc=0; "$DEDUPCTL" verify -c "$WORK/c.yaml" >"$WORK/verify2.out" 2>&1 || rc=$?
sed -n '/anomal/,$p' "$WORK/verify2.out"
assert_eq "$rc" 1 "verify exit code with two anomalies"
grep -qF "two-effects: key $K " "$WORK/verify2.out" || fail "the key applied twice is not named"
grep -qF "done-without-effect: key $D " "$WORK/verify2.out" || fail "the DONE key without its effect is not named"
log "ok: verify counts the SQL handler's effects where its config says"

# A name that is not a table is refused at start, with the reason.
conf "$WORK/bad.yaml" "{table: \"ledger; DROP TABLE account\"}"
rc=0; "$DEDUPD" -c "$WORK/bad.yaml" >"$WORK/bad.log" 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupd exit code with an evidence table that is no name"
grep -qF "evidence table 'ledger; DROP TABLE account' is not a table name" "$WORK/bad.log" ||
        fail "the refusal does not say why: $(tail -n 3 "$WORK/bad.log")"
conf "$WORK/nocol.yaml" "{key_column: idem_key}"
rc=0; "$DEDUPD" -c "$WORK/nocol.yaml" >"$WORK/nocol.log" 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupd exit code with evidence.key_column alone"
grep -qF "handler.config.evidence.table is required" "$WORK/nocol.log" || fail "no reason: $(tail -n 3 "$WORK/nocol.log")"

# Without the setting (and its row gone), verify says what it cannot check.
sql "DELETE FROM dedupd.evidence"
conf "$WORK/plain.yaml"
rc=0; "$DEDUPCTL" verify -c "$WORK/plain.yaml" >"$WORK/verify3.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "verify exit code without evidence"
grep -qF "(topic $T: handler sql declares no evidence table: only keys, counters and lag are checked)" "$WORK/verify3.out" ||
        fail "verify does not say the effects are unchecked: $(cat "$WORK/verify3.out")"
log "PASS"
