#!/usr/bin/env bash
# First outcome for every duplicate, to the reply topic the message names, byte
# for byte; and the outbox: an emitted message exists if and only if its effect
# committed, even when the process dies between COMMIT and publishing. Each
# reply and event goes out with an identity derived from its key and its place
# (dedupd.outbox.id): applied again after a failover lost the commits, every
# one goes out again with the id it had.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/outbox_lib.sh"
require_fault_points

T="pay_reply_$$" R="replies_$$"
topic "$T" 1
"$KT" create -t "$R" -p 1 >/dev/null
write_config "$WORK/c.yaml" "$T"
printf '%s\n' '{"order_id":"R1","user_id":9,"amount":10}' | "$KT" produce -t "$T" -H "reply-to=$R" -H correlation-id=c1
printf '%s\n' '{"order_id":"R2","user_id":9,"amount":5000}' | "$KT" produce -t "$T" -H "reply-to=$R" -H correlation-id=c2
start d1 "$WORK/c.yaml"
wait_done "$T"
# The caller timed out and retried both: the same requests, new correlation ids.
printf '%s\n' '{"order_id":"R1","user_id":9,"amount":10}' | "$KT" produce -t "$T" -H "reply-to=$R" -H correlation-id=c3
printf '%s\n' '{"order_id":"R2","user_id":9,"amount":5000}' | "$KT" produce -t "$T" -H "reply-to=$R" -H correlation-id=c4
wait_done "$T"
for ((i = 0; i < 100; i++)); do [[ $(produced "$R") == 4 ]] && break; sleep 0.1; done
stop d1
"$KT" dump -t "$R" >"$WORK/replies.txt"
cat "$WORK/replies.txt"
assert_eq "$(produced "$R")" 4 "replies published"
assert_eq "$(grep -c '^0 [0-9]* c[13] OK: debited 10$' "$WORK/replies.txt")" 2 "R1's first response, to the first ask and to the retry"
assert_eq "$(grep -c '^0 [0-9]* c[24] insufficient balance$' "$WORK/replies.txt")" 2 "R2's first rejection, to the first ask and to the retry"
assert_eq "$(grep -c '^  dedupd.duplicate=true$' "$WORK/replies.txt")" 2 "replies marked as answers to duplicates"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 9")" 990 "balance"
before=$(kafka_outbox_ids "$WORK/replies.txt")
assert_eq "$(awk '$1 == "c1" {print $3}' <<<"$before")" "$(derived_id "it-$ID" R1/PAY reply)" "c1's reply id, as a downstream derives it"
assert_eq "$(awk '$1 == "c3" {print $3}' <<<"$before")" "$(derived_id "it-$ID" R1/PAY reply "$T" 0 2)" "the id of the reply to c3, a duplicate at offset 2"

# A failover to a replica that had none of those commits: keys, replies,
# positions and the debit lost. The four messages apply again, and each reply
# goes out with the id it had.
lose_commits "it-$ID" "UPDATE account SET balance = 1000 WHERE user_id = 9; DELETE FROM transfer_ledger"
start d1b "$WORK/c.yaml"
wait_done "$T"
for ((i = 0; i < 100; i++)); do [[ $(produced "$R") == 8 ]] && break; sleep 0.1; done
stop d1b
"$KT" dump -t "$R" >"$WORK/replies2.txt"
assert_same_ids "$before" "$(kafka_outbox_ids "$WORK/replies2.txt")" "replies"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 9")" 990 "balance after the re-apply"
log "ok: every reply went out again with the id it had"

# Outbox with the flaky handler, which emits one event per effect.
E="events_$$" U="orders_$$"
topic "$U" 1
"$KT" create -t "$E" -p 1 >/dev/null
cat >"$WORK/e.yaml" <<YAML
namespace: it-$ID-emit
postgres: {conninfo: "$TEST_DSN"}
kafka: {bootstrap.servers: "$KAFKA_BOOTSTRAP", group.id: "grp-$ID-emit", group.instance.id: "emit-1", session.timeout.ms: "6000"}
outbox: {interval_ms: 200}
topics:
  - name: $U
    key: {subject: "{json:order_id}", action: SHIP}
    handler: {path: "$BUILD/tests/flaky.so", config: {emit_topic: "$E", emit_count: "2"}}
    batch: {max_messages: 10, max_wait_ms: 20}
YAML
for i in $(seq 1 30); do printf '{"order_id":"e%d"}\n' $((i % 20)); done | "$KT" produce -t "$U"
# Die right after the first COMMIT, before the relay published anything ...
DEDUPD_FAULT=after_commit:1 start d2 "$WORK/e.yaml"
rc=0; wait "${PIDS[d2]}" || rc=$?; unset "PIDS[d2]"
assert_eq "$rc" 137 "killed at after_commit"
committed=$(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL")
((committed > 0)) || fail "no unsent outbox rows after the crash"
assert_eq "$(produced "$E")" 0 "events published before the relay ran"
# ... and before its COMMIT on the next run (that batch's rows must vanish).
DEDUPD_FAULT=before_commit:1 start d3 "$WORK/e.yaml"
rc=0; wait "${PIDS[d3]}" || rc=$?; unset "PIDS[d3]"
assert_eq "$rc" 137 "killed at before_commit"
start d4 "$WORK/e.yaml"
wait_done "$U"
for ((i = 0; i < 100; i++)); do [[ $(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL") == 0 ]] && break; sleep 0.1; done
stop d4
"$KT" dump -t "$E" >"$WORK/events.txt"
assert_eq "$(produced "$E")" 40 "events published: two per effect"
before=$(kafka_outbox_ids "$WORK/events.txt")
assert_eq "$(awk '{print $1, $2}' <<<"$before" | uniq -d | wc -l)" 0 "events of one key and place published twice"
assert_eq "$(sql "SELECT count(*) FROM flaky_effects")" 20 "effects"
assert_eq "$(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL")" 0 "unsent outbox rows"
assert_eq "$(awk '$1 == "e7/SHIP" && $2 == 1 {print $3}' <<<"$before")" "$(derived_id "it-$ID-emit" e7/SHIP emit 1)" "the id of e7's second event, as a downstream derives it"
log "ok: emitted iff committed, across a crash after COMMIT and one before it"

# The same failover for the events: each goes out again with the id it had.
lose_commits "it-$ID-emit" "DELETE FROM flaky_effects"
start d5 "$WORK/e.yaml"
wait_done "$U"
for ((i = 0; i < 100; i++)); do [[ $(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL") == 0 ]] && break; sleep 0.1; done
stop d5
"$KT" dump -t "$E" >"$WORK/events2.txt"
assert_same_ids "$before" "$(kafka_outbox_ids "$WORK/events2.txt")" "events"
log "ok: every event went out again with the id it had"
