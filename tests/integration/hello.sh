#!/usr/bin/env bash
# The hello handler (handlers/hello, the SDK's example) runs the seed's
# scenario on the SDK's calls: an order paid once however often it arrives, a
# payment the balance cannot cover recorded FAILED with "insufficient
# balance" and answered so on every redelivery, exact balances; its tables
# made by ensure_schema and its evidence declared by set_evidence, so
# dedupctl verify counts its effects: no anomaly, then a planted second
# effect named. check and dedupd's start name it with its version.
. "$(dirname "$0")/lib.sh"

T="hello_$$"
topic "$T" 1
LOG_LEVEL=debug write_config "$WORK/c.yaml" "$T"
sed -i "s#path: \"$BUILD/transfer.so\"#path: \"$BUILD/hello.so\"#" "$WORK/c.yaml"
grep -q "hello.so" "$WORK/c.yaml" || fail "the config does not name hello.so"

# migrate runs the handler's init: ensure_schema creates its tables, set_evidence declares its ledger.
"$DEDUPCTL" migrate -c "$WORK/c.yaml" >"$WORK/migrate.out" 2>&1 || fail "migrate: $(cat "$WORK/migrate.out")"
assert_eq "$(sql "SELECT to_regclass('hello_account') IS NOT NULL AND to_regclass('hello_ledger') IS NOT NULL")" t \
        "hello's tables after migrate"
assert_eq "$(sql "SELECT handler || ' ' || table_name || '(' || key_column || ')' FROM dedupd.evidence WHERE topic = '$T'")" \
        "hello hello_ledger(idem_key)" "the evidence hello declared"
"$DEDUPCTL" migrate -c "$WORK/c.yaml" >"$WORK/migrate2.out" 2>&1 || fail "a second migrate: $(cat "$WORK/migrate2.out")"
sql "INSERT INTO hello_account VALUES (1, 1000), (3, 1000)"

rc=0; "$DEDUPCTL" check -c "$WORK/c.yaml" >"$WORK/check.out" 2>&1 || rc=$?
cat "$WORK/check.out"
assert_eq "$rc" 0 "dedupctl check exit code"
grep -qF "handler hello 1.0 (ABI " "$WORK/check.out" || fail "check does not name hello with its version"

# 9527 three times (a retry, a double click), A and B each drawing 600 of user 3's 1000.
printf '%s\n' '{"order_id":"9527","user_id":1,"amount":100}' '{"order_id":"9527","user_id":1,"amount":100}' \
        '{"order_id":"A","user_id":3,"amount":600}' '{"order_id":"B","user_id":3,"amount":600}' \
        '{"order_id":"9527","user_id":1,"amount":100}' '{"order_id":"9528","user_id":1,"amount":50}' |
        "$KT" produce -t "$T"
start d1 "$WORK/c.yaml"
wait_done "$T"
stop d1
grep -q "topic $T: handler hello 1.0 loaded from $BUILD/hello.so" "$WORK/d1.log" ||
        fail "dedupd's start does not name hello with its version"
assert_eq "$(sql "SELECT string_agg(user_id || '=' || balance, ' ' ORDER BY user_id) FROM hello_account")" "1=850 3=400" \
        "balances after the first run"
assert_eq "$(sql "SELECT count(*) FROM hello_ledger WHERE idem_key = '9527/PAY'")" 1 "ledger rows for 9527"
assert_eq "$(sql "SELECT status || ': ' || response FROM dedupd.keys WHERE idem_key = '9527/PAY'")" "DONE: OK: debited 100" \
        "9527 recorded"
assert_eq "$(sql "SELECT status || ': ' || response FROM dedupd.keys WHERE idem_key = 'B/PAY'")" \
        "FAILED: insufficient balance" "B recorded"
assert_eq "$(sql "SELECT consumed || '/' || applied || '/' || rejected || '/' || duplicates FROM dedupd.offsets WHERE topic = '$T'")" \
        "6/3/1/2" "consumed/applied/rejected/duplicates"

# Money arrives; B and 9527 are redelivered: the stored outcomes, no change.
sql "UPDATE hello_account SET balance = balance + 1000 WHERE user_id = 3"
printf '%s\n' '{"order_id":"B","user_id":3,"amount":600}' '{"order_id":"9527","user_id":1,"amount":100}' |
        "$KT" produce -t "$T"
start d2 "$WORK/c.yaml"
wait_done "$T"
stop d2
assert_eq "$(sql "SELECT string_agg(user_id || '=' || balance, ' ' ORDER BY user_id) FROM hello_account")" "1=850 3=1400" \
        "balances after the redelivery"
grep -q "duplicate B/PAY absorbed; first outcome FAILED: insufficient balance" "$WORK/d2.log" ||
        fail "the redelivery of B was not answered with the first rejection"
log "ok: the seed's scenario: paid once, rejected once, exact balances"

# verify counts hello's effects through what it declared.
rc=0; "$DEDUPCTL" verify -c "$WORK/c.yaml" --expect-caught-up >"$WORK/verify1.out" 2>&1 || rc=$?
cat "$WORK/verify1.out"
assert_eq "$rc" 0 "verify exit code"
grep -qF "  hello_ledger (handler hello, topic $T)" "$WORK/verify1.out" || fail "verify did not check hello_ledger"
grep -q "^no anomaly" "$WORK/verify1.out" || fail "verify printed no verdict"
sql "INSERT INTO hello_ledger VALUES ('9527/PAY', 1, 100)"
rc=0; "$DEDUPCTL" verify -c "$WORK/c.yaml" >"$WORK/verify2.out" 2>&1 || rc=$?
sed -n '/anomal/,$p' "$WORK/verify2.out"
assert_eq "$rc" 1 "verify exit code with a planted second effect"
grep -qF "two-effects: key 9527/PAY (from $T/0 offset 0): 2 rows in hello_ledger" "$WORK/verify2.out" ||
        fail "verify does not name 9527/PAY"
log "PASS"
