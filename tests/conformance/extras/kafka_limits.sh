#!/usr/bin/env bash
# Kafka only (a named extra of the conformance suite, whose limits scenario
# covers the message limits on every broker): a limit out of range is a
# config error; limits.batch_bytes closes batches early; limits.outbox_backlog
# pauses every topic while the relay cannot publish, and resumes when it can —
# nothing lost, no balance wrong.
. "$(dirname "$0")/../../integration/lib.sh"

pad() { head -c "$1" /dev/zero | tr '\0' p; }
order() { printf '{"order_id":"%s","user_id":%d,"amount":%d%s}\n' "$1" "$2" "$3" "${4:-}"; }

# ---- 1. a limit out of range is a config error, from check and from dedupd
T="pay_limits_$$"
topic "$T" 1
write_config "$WORK/bad.yaml" "$T" "limits:
  json_depth: 0"
rc=0
"$DEDUPCTL" check --offline -c "$WORK/bad.yaml" >"$WORK/check.txt" 2>&1 || rc=$?
assert_eq "$rc" 1 "dedupctl check exit code on limits.json_depth: 0"
grep -q "bad.yaml:[0-9]*:[0-9]*: 'limits.json_depth': 0 is out of range \[1, 2048\]" "$WORK/check.txt" ||
        fail "check message: $(cat "$WORK/check.txt")"
rc=0
"$DEDUPD" -c "$WORK/bad.yaml" >"$WORK/bad.log" 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupd exit code on limits.json_depth: 0"

# ---- 2. batch memory: batches close at limits.batch_bytes -----------------------------
T2="pay_batchbytes_$$"
topic "$T2" 1
for i in $(seq 1 30); do order "bb-$i" $((i % 20 + 1)) 10 ",\"pad\":\"$(pad 1500)\""; done | "$KT" produce -t "$T2"
LOG_LEVEL=debug write_config "$WORK/b.yaml" "$T2" "limits:
  batch_bytes: 4096"
start d2 "$WORK/b.yaml"
wait_done "$T2"
stop d2
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE idem_key LIKE 'bb-%'")" 30 "keys of the batch-memory run"
batches=$(grep -o 'batches [0-9]*' "$WORK/d2.log" | tail -n 1 | cut -d' ' -f2)
# 1,5xx-byte payloads, 4096 bytes a batch: two a batch at most, so at least 15 batches
((batches >= 15)) || fail "batches: $batches for 30 payloads of 1.5 KB with limits.batch_bytes 4096"
log "ok: $batches batches for 30 payloads of 1.5 KB (limits.batch_bytes 4096)"
grep -q "closed at [0-9]* payload bytes (limits.batch_bytes 4096)" "$WORK/d2.log" || fail "no batch closed early in the log"
maxb=$(grep -o 'batch of [0-9]* closed at' "$WORK/d2.log" | awk '{print $3}' | sort -n | tail -n 1)
((maxb <= 2)) || fail "a batch of $maxb closed early: more than 4096 payload bytes"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key LIKE 'bb-%'")" 30 "ledger rows of the batch-memory run"

# ---- 3. the outbox backlog: every topic pauses while the relay cannot publish ------------
T3="pay_outbox_$$" R3="replies_limits_$$"
topic "$T3" 1
# A reply topic that takes no record: the relay fails, its rows stay unsent.
"$KT" create -t "$R3" -p 1 -c max.message.bytes=40 >/dev/null
write_config "$WORK/c.yaml" "$T3" "limits:
  outbox_backlog: 5
outbox:
  interval_ms: 300"
for i in $(seq 1 20); do order "ob-$i" $((i % 20 + 1)) 10; done | "$KT" produce -t "$T3" -H "reply-to=$R3" -H correlation-id=c
start d3 "$WORK/c.yaml"
wait_done "$T3"
for ((i = 0; i < 300; i++)); do
        grep -q "every topic pauses fetching" "$WORK/d3.log" && break
        sleep 0.1
done
grep -q "or more outbox rows are unsent, limits.outbox_backlog is 5: every topic pauses fetching" "$WORK/d3.log" ||
        fail "no pause at limits.outbox_backlog"
log "ok: paused at limits.outbox_backlog 5 with $(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL") unsent rows"
# While paused, new messages wait in Kafka.
for i in $(seq 21 30); do order "ob-$i" $((i % 20 + 1)) 10; done | "$KT" produce -t "$T3"
sleep 4
assert_eq "$(progressed "$T3")" 20 "records processed while the outbox is behind"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE idem_key LIKE 'ob-%'")" 20 "keys while paused"
# The reply topic takes records again: the relay publishes, fetching resumes.
"$KT" delete -t "$R3" >/dev/null
sleep 2
"$KT" create -t "$R3" -p 1 >/dev/null
wait_done "$T3" 90
stop d3
grep -q "relay caught up: fetching resumes" "$WORK/d3.log" || fail "no resume line"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE idem_key LIKE 'ob-%'")" 30 "keys after the relay caught up"
assert_eq "$(sql "SELECT count(*) || '/' || count(*) FILTER (WHERE sent_at IS NULL) FROM dedupd.outbox")" "20/0" \
        "outbox rows / unsent (every reply published)"
replies=$("$KT" dump -t "$R3" | grep -c '^0 ' || true)
((replies >= 20)) || fail "reply topic holds $replies replies, expected 20 (at least once)"
log "ok: the reply topic holds $replies replies for 20 rows"
assert_eq "$(kafka_lag "$T3")" 0 "Kafka consumer lag"
assert_eq "$(sql "SELECT sum(a.balance) + (SELECT sum(amount) FROM transfer_ledger) = count(*) * 1000 FROM account a")" t \
        "balances plus debits equal the initial total"

# ---- 4. external mode: limits apply there too, and a hashed key keeps its text -----------
T4="ext_limits_$$"
long=$(printf 'L%.0s' $(seq 1 600)) # a 604-byte key: hashed, within key_bytes
topic "$T4" 1
cat >"$WORK/d.yaml" <<YAML
namespace: it-$ID
shutdown_timeout_ms: 15000
postgres: {conninfo: "$TEST_DSN", retry_max_ms: 1000}
kafka: {bootstrap.servers: "$KAFKA_BOOTSTRAP", group.id: "grp-$ID-ext", session.timeout.ms: "6000"}
limits: {headers: 1}
topics:
  - name: $T4
    mode: external
    key: {subject: "{json:id}", action: WRITE}
    handler:
      path: "$BUILD/filesink.so"
      config: {path: "$WORK/d.sink", delay_ms: "0"}
    batch: {max_messages: 100, max_wait_ms: 20}
YAML
{
        printf '{"id":"e-1"}\n'
        printf '{"id":"%s"}\n' "$long"
} | "$KT" produce -t "$T4"
printf '{"id":"e-2"}\n' | "$KT" produce -t "$T4" -H a=1 -H b=2
start d4 "$WORK/d.yaml"
wait_done "$T4"
stop d4
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE topic = '$T4' AND status = 'DONE'")" 2 "external keys DONE"
assert_eq "$(sql "SELECT key_text = '$long/WRITE' FROM dedupd.keys WHERE topic = '$T4' AND idem_key LIKE 'sha256:%'")" t \
        "external mode: key_text of the hashed key"
assert_eq "$(wc -l <"$WORK/d.sink")" 2 "external mode: lines in the sink"
"$KT" dump -t "$T4.dlq" | grep -F "  dedupd.reason=2 headers exceed limits.headers (1)" >/dev/null || fail "external mode: no headers dead letter"
log "ok: external mode: the message with 2 headers dead-lettered at limits.headers 1"
