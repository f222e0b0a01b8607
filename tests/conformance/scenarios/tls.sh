#!/usr/bin/env bash
# TLS: the seed's order 9527/PAY sent 20 times and three more orders each sent
# twice, waiting on the broker's TLS endpoint (b_tls_setup: with a password):
# 1. with a CA that did not sign the broker's certificate, dedupd exits 1
#    by startup_timeout_ms with an ERROR naming the certificate failure,
#    and applies nothing;
# 2. with the broker's CA it consumes them over TLS: one effect per key, exact
#    balances, nothing unacknowledged;
# 3. the password is in no log and not in `dedupctl check --print`.
. "$(dirname "$0")/../lib.sh"

STARTUP_MS=10000
b_tls_setup pay_tls
b_tls_config "$WORK/c.yaml" "$TLS_CA"
b_tls_config "$WORK/wrong-ca.yaml" "$DEDUPD_TLS_DIR/wrong-ca.crt"
sed -i "s/^shutdown_timeout_ms:/startup_timeout_ms: $STARTUP_MS\nshutdown_timeout_ms:/" "$WORK/wrong-ca.yaml"
"$DEDUPCTL" migrate -c "$WORK/c.yaml" >/dev/null

{
        for i in $(seq 1 20); do echo '{"order_id":"9527","user_id":1,"amount":10}'; done
        for r in 1 2; do for o in 1 2 3; do printf '{"order_id":"tls-%d","user_id":5,"amount":10}\n' "$o"; done; done
} | b_produce
assert_eq "$(b_count)" 26 "messages produced"

# ---- 1. a wrong CA: refused at startup, nothing applied
rc=0
t0=$(date +%s%N)
timeout 120 "$DEDUPD" -c "$WORK/wrong-ca.yaml" >"$WORK/wrong-ca.log" 2>&1 || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
assert_eq "$rc" 1 "dedupd's exit code with a CA that did not sign the broker's certificate"
# (it gives up at the first refusal, or, retrying, at startup_timeout_ms; 3 s to exit)
((ms < STARTUP_MS + 3000)) || fail "dedupd took $ms ms to give up (startup_timeout_ms $STARTUP_MS)"
grep ' ERROR ' "$WORK/wrong-ca.log" | grep -E -- "$B_TLS_REFUSED" >/dev/null ||
        fail "the ERROR does not name the certificate failure: $(grep ' ERROR ' "$WORK/wrong-ca.log" || tail -n 3 "$WORK/wrong-ca.log")"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 0 "ledger rows after the wrong CA"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" 0 "keys after the wrong CA"
log "ok: a wrong CA refused after $ms ms: $(grep -m1 ' ERROR ' "$WORK/wrong-ca.log")"

# ---- 2. the broker's CA: everything once
start d1 "$WORK/c.yaml"
b_wait_done
stop d1
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key = '9527/PAY'")" 1 "ledger rows for 9527/PAY"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 4 "ledger rows"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 1")" 990 "balance of user 1"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 5")" 970 "balance of user 5"
assert_eq "$(sql "SELECT sum(applied) || '/' || sum(duplicates) FROM dedupd.offsets WHERE topic = '$NAME_B'")" "4/22" "applied/duplicates counted"
b_check_acked
b_check_started d1
log "ok: 26 messages over TLS, 4 keys applied once each"

# ---- 3. the password is in no output
rc=0
"$DEDUPCTL" check -c "$WORK/c.yaml" --print >"$WORK/print.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "dedupctl check --print over TLS"
grep -q "(set, not shown)" "$WORK/print.out" || fail "check --print marks no secret as not shown: $(cat "$WORK/print.out")"
for f in "$WORK"/*.log "$WORK"/print.out; do
        if grep -qF -- "$TLS_SECRET" "$f"; then fail "the password is in $(basename "$f"): $(grep -F -- "$TLS_SECRET" "$f" | head -n 2)"; fi
done
log "ok: the password is in none of $(ls "$WORK"/*.log "$WORK"/print.out | wc -l) outputs"
