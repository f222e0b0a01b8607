#!/usr/bin/env bash
# NATS JetStream at startup and in dedupctl check: a URL's password is never
# logged nor printed; a missing stream is refused by check (exit 1) and by
# dedupd (exit 2) naming it; a server that does not answer makes dedupd give
# up after startup_timeout_ms (exit 1) saying what it waited for, and check
# exit 2.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"

SECRET="Pw$$secret"
AUTH_URL="${NATS_URL/nats:\/\//nats://dedupd:$SECRET@}"

# ---- the password in the URL: used, never shown
nats_stream
write_nats_config "$WORK/c.yaml"
sed -i "s|  url: \"$NATS_URL\"|  url: \"$AUTH_URL\"|" "$WORK/c.yaml"
grep -q "$SECRET" "$WORK/c.yaml" || fail "the test's config does not carry the password"
rc=0; "$DEDUPCTL" check -c "$WORK/c.yaml" --print >"$WORK/check.out" 2>&1 || rc=$?
cat "$WORK/check.out"
assert_eq "$rc" 0 "check of a NATS config exits"
grep -q "^nats.url: (set, not shown)$" "$WORK/check.out" || fail "check --print shows the URL"
grep -q "^stream $STREAM on nats://127.0.0.1:[0-9]*: exists" "$WORK/check.out" || fail "check did not look for the stream"
echo '{"order_id":"s1","user_id":3,"amount":10}' | publish
start d1 "$WORK/c.yaml"
nats_done
stop d1
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 3")" 990 "applied with the password in the URL"
if grep -q "$SECRET" "$WORK/check.out" "$WORK/d1.log"; then fail "the password was printed or logged"; fi
log "ok: the password is in neither check's output nor dedupd's log"

# ---- a stream that does not exist
write_nats_config "$WORK/m.yaml"
sed -i "s|  stream: $STREAM|  stream: NOPE_$ID|" "$WORK/m.yaml"
rc=0; "$DEDUPCTL" check -c "$WORK/m.yaml" >"$WORK/m.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "check with a missing stream exits"
grep -q "nats.stream NOPE_$ID does not exist" "$WORK/m.out" || fail "check does not name the missing stream: $(cat "$WORK/m.out")"
rc=0; "$DEDUPD" -c "$WORK/m.yaml" >"$WORK/m.log" 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupd with a missing stream exits"
grep -q "nats.stream NOPE_$ID does not exist" "$WORK/m.log" || fail "dedupd does not name the missing stream"

# ---- nothing answers
write_nats_config "$WORK/u.yaml"
sed -i "s|  url: \"$NATS_URL\"|  url: \"nats://127.0.0.1:1\"|; s|^shutdown_timeout_ms: 15000|startup_timeout_ms: 3000\nshutdown_timeout_ms: 15000|" "$WORK/u.yaml"
t0=$(date +%s%N)
rc=0; "$DEDUPD" -c "$WORK/u.yaml" >"$WORK/u.log" 2>&1 || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
assert_eq "$rc" 1 "dedupd with no server exits"
grep -q "startup: gave up after 3000 ms (startup_timeout_ms) waiting for NATS: cannot connect to NATS at nats://127.0.0.1:1" "$WORK/u.log" ||
        fail "dedupd does not say what it waited for: $(tail -n 3 "$WORK/u.log")"
((ms < 8000)) || fail "dedupd took $ms ms to give up (startup_timeout_ms 3000)"
log "ok: gave up after $ms ms"
rc=0; "$DEDUPCTL" check -c "$WORK/u.yaml" >"$WORK/u.out" 2>&1 || rc=$?
assert_eq "$rc" 2 "check with no server exits"
