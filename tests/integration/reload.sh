#!/usr/bin/env bash
# SIGHUP reloads what reloads — log level, batch limits — without leaving the
# group; what only a restart applies is named; a bad file is refused with its
# file:line:column and the running configuration stays. (SIGHUP used to end
# the daemon with status 129.)
. "$(dirname "$0")/lib.sh"

T="pay_reload_$$"
export SEED_ACCOUNTS=50 INITIAL_BALANCE=100000
topic "$T" 1
BATCH_MAX=50 LOG_LEVEL=warn write_config "$WORK/c.yaml" "$T"
# full batches only, so a batch's size is the limit in force
sed -i 's/^      max_wait_ms: 20$/      max_wait_ms: 3000\n      adaptive: false/' "$WORK/c.yaml"
grep -q "adaptive: false" "$WORK/c.yaml" || fail "config not as expected: $(cat "$WORK/c.yaml")"
start d1 "$WORK/c.yaml"

# batch_sizes SINCE: the sizes of the batches committed after SINCE (a timestamp), one per line
batch_sizes() { sql "SELECT sum(consumed) FROM dedupd.progress_log WHERE committed_at > '$1' GROUP BY committed_at ORDER BY committed_at"; }

workload "$WORK/w1.txt" "$WORK/k1.txt" 500 500
"$KT" produce -t "$T" <"$WORK/w1.txt"
wait_done "$T"
assert_eq "$(batch_sizes -infinity | sort -u)" 50 "batch sizes before the reload"

sed -i 's/^log_level: warn$/log_level: info/; s/^      max_messages: 50$/      max_messages: 200/' "$WORK/c.yaml"
sed -i 's/session.timeout.ms: "6000"/session.timeout.ms: "7000"/' "$WORK/c.yaml"
mark=$(sql "SELECT now()")
kill -HUP "${PIDS[d1]}"
for ((i = 0; i < 50; i++)); do grep -q "reloaded:" "$WORK/d1.log" && break; sleep 0.1; done
grep -q "SIGHUP: $WORK/c.yaml reloaded: log_level warn -> info; topics\[$T\].batch.max_messages 50 -> 200" "$WORK/d1.log" ||
        fail "the reload does not say what it applied: $(grep -i reload "$WORK/d1.log")"
grep -q "changed, but only a restart applies it: kafka$" "$WORK/d1.log" ||
        fail "a change that needs a restart is not named: $(grep -i reload "$WORK/d1.log")"
kill -0 "${PIDS[d1]}" 2>/dev/null || fail "SIGHUP ended dedupd"
log "ok: SIGHUP applied log_level and batch.max_messages, named kafka as needing a restart"

awk 'NR <= 400 { sub(/"order_id":"o-/, "\"order_id\":\"p-"); print }' "$WORK/w1.txt" >"$WORK/w2.txt"
"$KT" produce -t "$T" <"$WORK/w2.txt"
wait_done "$T"
assert_eq "$(batch_sizes "$mark" | sort -u)" 200 "batch sizes after the reload"

# A bad file: refused with where, and nothing changes.
cp "$WORK/c.yaml" "$WORK/good.yaml"
sed -i 's/^      max_messages: 200$/      max_messages: 10\n      colour: red/' "$WORK/c.yaml"
mark=$(sql "SELECT now()")
kill -HUP "${PIDS[d1]}"
for ((i = 0; i < 50; i++)); do grep -q "refused, the running configuration stays" "$WORK/d1.log" && break; sleep 0.1; done
grep -q "c.yaml:[0-9]*:[0-9]*: unknown key 'topics\[0\].batch.colour'" "$WORK/d1.log" || fail "the bad file's error is not located: $(grep -v "rejected:" "$WORK/d1.log" | tail -12)"
grep -q "SIGHUP: $WORK/c.yaml refused, the running configuration stays" "$WORK/d1.log" || fail "the refusal is not said"
awk 'NR <= 400 { sub(/"order_id":"o-/, "\"order_id\":\"q-"); print }' "$WORK/w1.txt" >"$WORK/w3.txt"
"$KT" produce -t "$T" <"$WORK/w3.txt"
wait_done "$T"
assert_eq "$(batch_sizes "$mark" | sort -u)" 200 "batch sizes after a refused reload"
grep -q "partitions revoked" "$WORK/d1.log" && fail "dedupd left its group during the reloads"
stop d1
# Started at warn: an INFO line at all is the reloaded level in force.
grep -q "INFO .*stopped cleanly" "$WORK/d1.log" || fail "log_level info not in force after the reload"
log "ok: a bad file refused with file:line:column, the running configuration kept, the group never left"
