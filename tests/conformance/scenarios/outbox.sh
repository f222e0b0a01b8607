#!/usr/bin/env bash
# The outbox: a message a handler emits exists if and only if its effect
# committed, even when the process dies between COMMIT and publishing, or
# before COMMIT; each is published once, acknowledged by the broker, with an
# identity a downstream derives itself (dedupd.outbox.id: key and place).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../../integration/outbox_lib.sh"
require_fault_points

b_setup orders 1
E=$(b_out events)
cat >"$WORK/e.yaml" <<YAML
$(b_head)
outbox: {interval_ms: 200}
topics:
  - name: $NAME_B
    key: {subject: "{json:order_id}", action: SHIP}
    handler: {path: "$BUILD/tests/flaky.so", config: {emit_topic: "$E", emit_count: "2"}}
    batch: {max_messages: 10, max_wait_ms: 20}
YAML
for i in $(seq 1 30); do printf '{"order_id":"e%d"}\n' $((i % 20)); done | b_produce
# Die right after the first COMMIT, before the relay published anything ...
DEDUPD_FAULT=after_commit:1 start d2 "$WORK/e.yaml"
wait_exit d2
assert_eq "$RC" 137 "killed at after_commit"
committed=$(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL")
((committed > 0)) || fail "no unsent outbox rows after the crash"
assert_eq "$(b_out_count "$E")" 0 "events published before the relay ran"
# ... and before its COMMIT on the next run (that batch's rows must vanish).
DEDUPD_FAULT=before_commit:1 start d3 "$WORK/e.yaml"
wait_exit d3
assert_eq "$RC" 137 "killed at before_commit"
start d4 "$WORK/e.yaml"
b_wait_done
poll 30 outbox_sent || fail "outbox rows left unsent"
poll 30 events_are 40 || fail "$GOT events of 40 at $E"
stop d4
b_check_acked

b_out_read "$E" "$WORK/events.txt"
assert_eq "$(wc -l <"$WORK/events.txt")" 40 "events published: two per effect"
ids() { grep -oaE '(^|;)dedupd\.outbox\.id=[0-9a-f]{64}' "$WORK/events.txt" | sed 's/.*=//'; }
assert_eq "$(ids | sort -u | wc -l)" 40 "distinct event ids (no key and place published twice)"
assert_eq "$(sql "SELECT count(*) FROM flaky_effects")" 20 "effects"
assert_eq "$(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL")" 0 "unsent outbox rows"
ids | grep -x "$(derived_id "it-$ID" e7/SHIP emit 1)" >/dev/null || fail "no event of e7 with the id a downstream derives for its second"
assert_eq "$(awk -F'\t' '$1 ~ /(^|;)broker\.id=/' "$WORK/events.txt" | awk -F'\t' '{ n = split($1, h, ";"); b = o = ""
        for (i = 1; i <= n; i++) { if (h[i] ~ /^broker\.id=/) b = substr(h[i], 11); if (h[i] ~ /^dedupd\.outbox\.id=/) o = substr(h[i], 18) }
        if (b != o) print }' | wc -l)" 0 "events whose broker message id is not their dedupd.outbox.id"
log "ok: emitted iff committed, across a crash after COMMIT and one before it"
