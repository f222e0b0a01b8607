#!/usr/bin/env bash
# Dead letters always fit. A record dedupd cannot process must reach its
# dead-letter topic whatever its size, or the good orders behind it wait
# forever: librdkafka's own limit is raised to what dedupd may dead-letter, a
# record larger than the dead-letter topic takes is cut to fit and says so,
# and a dead-letter topic too small for max_payload_bytes is refused at start.
. "$(dirname "$0")/lib.sh"

big() { head -c "$1" /dev/zero | tr '\0' x; echo; } # a payload of N bytes, not JSON
orders() { for i in $(seq "$2" "$3"); do printf '{"order_id":"%s-%d","user_id":%d,"amount":1}\n' "$1" "$i" $((i % 50 + 1)); done; }
wait_applied() { # N: until N ledger rows
        for ((i = 0; i < 600; i++)); do (($(sql "SELECT count(*) FROM transfer_ledger" 2>/dev/null || echo 0) >= $1)) && return 0; sleep 0.1; done
        fail "only $(sql "SELECT count(*) FROM transfer_ledger") of $1 orders applied: the partition is blocked"
}
produce_big() { "$KT" produce -t "$1" -X message.max.bytes=2000000; }

# ---- 1. 1,040,000 bytes: over max_payload_bytes (1,000,000), under what the
#         topics hold (Kafka's default max.message.bytes, 1,048,588): the dead
#         letter is the whole record
T="dlqsize_whole_$$"
topic "$T" 1
write_config "$WORK/a.yaml" "$T"
{ orders a 1 20; big 1040000; orders a 21 40; } | produce_big "$T"
start a "$WORK/a.yaml"
wait_applied 40
wait_done "$T" 30
stop a
"$KT" dump -t "$T.dlq" -l >"$WORK/dlq.txt"
assert_eq "$(grep -c '^0 ' "$WORK/dlq.txt")" 1 "dead letters"
assert_eq "$(awk '/^0 /{print $4}' "$WORK/dlq.txt")" "value=1040000" "the dead letter's value, whole"
grep -q "dedupd.reason=payload too large: 1040000 bytes exceeds limits.payload_bytes (1000000)" "$WORK/dlq.txt" || fail "reason: $(cat "$WORK/dlq.txt")"
assert_eq "$(kafka_lag "$T")" 0 "Kafka lag"

# ---- 2. a record larger than its dead-letter topic takes (300,000 bytes):
#         cut to fit, with the truncation and the origin in its headers
T="dlqsize_cut_$$"
"$KT" create -t "$T" -p 1 >/dev/null
"$KT" create -t "$T.dlq" -p 1 -c max.message.bytes=300000 >/dev/null
write_config "$WORK/b.yaml" "$T" "    max_payload_bytes: 200000"
sql "TRUNCATE transfer_ledger"
{ orders b 1 10; big 700000; orders b 11 20; } | produce_big "$T"
start b "$WORK/b.yaml"
wait_applied 20
wait_done "$T" 30
stop b
"$KT" dump -t "$T.dlq" -l >"$WORK/dlq2.txt"
assert_eq "$(grep -c '^0 ' "$WORK/dlq2.txt")" 1 "dead letters of the cut record"
kept=$(awk '/^0 /{sub("value=", "", $4); print $4}' "$WORK/dlq2.txt")
((kept > 200000 && kept < 300000)) || fail "expected the first 200..300 kB of the value kept, got $kept bytes"
log "ok: $kept of 700000 bytes kept"
grep -q "dedupd.truncated=value cut to its first $kept of 700000 bytes: the dead-letter topic takes records of at most 300000 bytes" "$WORK/dlq2.txt" || fail "no truncation header: $(cat "$WORK/dlq2.txt")"
grep -q "dedupd.original.size=700000" "$WORK/dlq2.txt" || fail "no original size header"
grep -q "dedupd.origin.offset=10" "$WORK/dlq2.txt" || fail "no origin offset header"
grep -q "dedupd.reason=payload too large: 700000 bytes" "$WORK/dlq2.txt" || fail "no reason header"

# ---- 3. a dead-letter topic that cannot hold max_payload_bytes: refused at start
T="dlqsize_small_$$"
"$KT" create -t "$T" -p 1 >/dev/null
"$KT" create -t "$T.dlq" -p 1 -c max.message.bytes=100000 >/dev/null
write_config "$WORK/c.yaml" "$T"
rc=0; "$DEDUPCTL" check -c "$WORK/c.yaml" >"$WORK/check.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "dedupctl check exit code"
grep -q "c.yaml:[0-9]*:[0-9]*: dead-letter topic $T.dlq accepts records of at most 100000 bytes (max.message.bytes) but topic $T lets payloads of 1000000 bytes through" "$WORK/check.out" || fail "check says: $(cat "$WORK/check.out")"
rc=0; timeout 60 "$DEDUPD" -c "$WORK/c.yaml" >"$WORK/c.log" 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupd exit code with a dead-letter topic too small"
grep -q "ERROR .*dead-letter topic $T.dlq accepts records of at most 100000 bytes" "$WORK/c.log" || fail "dedupd says: $(tail -n 5 "$WORK/c.log")"
grep -q "joined\|assigned" "$WORK/c.log" && fail "dedupd joined the group before refusing"
log "ok: refused before joining the group"
