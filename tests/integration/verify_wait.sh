#!/usr/bin/env bash
# dedupctl verify --wait SECONDS run right after dedupd starts: it waits until
# every record is consumed and committed, so the report counts them all (not
# "no anomaly" with records unconsumed); a wait too short to catch up exits 1
# and says how far behind it was. On Kafka, then on NATS (where the consumer
# verify asks about does not exist until dedupd has made it).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"

T="vw_$$"
topic "$T" 4
workload "$WORK/w.txt" "$WORK/keys.txt" 20000 12000
"$KT" produce -t "$T" <"$WORK/w.txt"
write_config "$WORK/c.yaml" "$T"

start d1 "$WORK/c.yaml"
rc=0; "$DEDUPCTL" verify -c "$WORK/c.yaml" --wait 120 >"$WORK/wait.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "verify --wait 120 right after dedupd started exits"
grep -Eq '^  consumed +20000$' "$WORK/wait.out" || fail "verify --wait did not count every record: $(cat "$WORK/wait.out")"
grep -Eq '^  distinct keys +12000$' "$WORK/wait.out" || fail "verify --wait: not every key: $(cat "$WORK/wait.out")"
grep -q "every partition caught up" "$WORK/wait.out" || fail "verify --wait: $(tail -n 1 "$WORK/wait.out")"
log "ok: verify --wait 120 right after the start counts all 20000 records"
stop d1

# 5000 more while dedupd is stopped: a 2 s wait runs out, exit 1, and says by how much.
head -n 5000 "$WORK/w.txt" | "$KT" produce -t "$T"
rc=0; "$DEDUPCTL" verify -c "$WORK/c.yaml" --wait 2 >"$WORK/short.out" 2>"$WORK/short.err" || rc=$?
assert_eq "$rc" 1 "verify --wait 2 with 5000 records unconsumed exits"
grep -q "^dedupctl verify: not caught up after --wait 2 s:" "$WORK/short.err" || fail "no timeout message: $(cat "$WORK/short.err")"
behind=$(sed -n 's/.* dedupd at [0-9-]* (lag \([0-9]*\)).*/\1/p' "$WORK/short.err" | awk "{ s += \$1 } END { print s }")
assert_eq "$behind" 5000 "records behind, as the timeout message counts them"
grep -q "^  lag: $T/[0-3] is not caught up" "$WORK/short.out" || fail "the report lists no lag anomaly: $(cat "$WORK/short.out")"
rc=0; "$DEDUPCTL" verify -c "$WORK/c.yaml" --wait soon >/dev/null 2>"$WORK/bad.err" || rc=$?
assert_eq "$rc" 2 "verify --wait soon exits"
log "ok: a wait too short exits 1 with the lag (5000 records)"

# NATS: 3000 messages, verify --wait right after the start (dedupd has not made its consumer yet).
nats_stream
# (other orders than Kafka's: the handler's tables are the same, the namespace is not)
workload "$WORK/n.txt" "$WORK/nkeys.txt" 3000 2000
sed 's/"o-/"n-/' "$WORK/n.txt" | publish
write_nats_config "$WORK/n.yaml"
sed -i "s/^namespace: .*/namespace: it-$ID-nats/" "$WORK/n.yaml"
start n1 "$WORK/n.yaml"
rc=0; "$DEDUPCTL" verify -c "$WORK/n.yaml" --wait 120 >"$WORK/nwait.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "NATS: verify --wait 120 right after dedupd started exits"
grep -Eq '^  consumed +3000$' "$WORK/nwait.out" || fail "NATS: verify --wait did not count every message: $(cat "$WORK/nwait.out")"
stop n1
log "ok: NATS: verify --wait 120 right after the start counts all 3000 messages"
