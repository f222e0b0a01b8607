#!/usr/bin/env bash
# External-effect mode (mode: external, the file sink): a workload with
# duplicates; the owner killed with SIGKILL mid-effect (asleep in the
# handler, before it wrote), then a second instance killed right after an
# effect and before recording DONE (the in_handler fault point), then a third
# that finishes. What an owner held unacknowledged comes back from the
# broker: the dead owner's live lease is waited out, the key taken over by
# compare-and-set, and the sink (which checks the key before writing) keeps
# every key's line exactly once. Every key ends DONE, nothing unacknowledged.
. "$(dirname "$0")/../lib.sh"
require_fault_points

SINK="$WORK/sink"
b_setup ext 1
# ext_config FILE DELAY_MS (the lease outlives a restart: B_RESTART_S, how long the broker takes to give a new instance the dead one's messages)
ext_config() {
        cat >"$1" <<YAML
$(PREFETCH=100 b_head)
topics:
  - name: $NAME_B
    mode: external
    external: {lease_ms: $((6000 + 1000 * B_RESTART_S)), on_expired: dead-letter}
    key: {subject: "{json:id}", action: WRITE}
    handler:
      path: "$BUILD/filesink.so"
      config: {path: "$SINK", delay_ms: "$2"}
    batch: {max_messages: 100, max_wait_ms: 20}
    retry: {max_attempts: 3, backoff_ms: 50, backoff_max_ms: 500}
YAML
}
ext_config "$WORK/slow.yaml" 400
ext_config "$WORK/fast.yaml" 0
KEYS=12
# every key twice, the duplicate a few deliveries after the first
for ((i = 0; i < KEYS; i++)); do
        printf '{"id":"k%02d","n":%d}\n' "$i" "$i"
        ((i >= 3)) && printf '{"id":"k%02d","n":%d}\n' "$((i - 3))" "$((i - 3))"
done >"$WORK/w.txt"
for ((i = KEYS - 3; i < KEYS; i++)); do printf '{"id":"k%02d","n":%d}\n' "$i" "$i"; done >>"$WORK/w.txt"
b_produce <"$WORK/w.txt"
assert_eq "$(b_count)" $((2 * KEYS)) "messages produced"

status_of() { sql "SELECT status || ' ' || attempts || ' ' || coalesce(response, '-') FROM dedupd.keys WHERE idem_key = '$1'"; }
lines_for() { grep -c "^$1	" "$SINK" || true; }

# ---- 1. SIGKILL while the owner sleeps in the handler, before it wrote ---------
start d1 "$WORK/slow.yaml"
pid1=${PIDS[d1]}
for ((i = 0; i < 300; i++)); do
        [[ $(sql "SELECT count(*) FILTER (WHERE status = 'DONE') >= 3 AND count(*) FILTER (WHERE status = 'PENDING') = 1 FROM dedupd.keys" 2>/dev/null) == t ]] && break
        sleep 0.05
done
crash d1
mid=$(sql "SELECT idem_key FROM dedupd.keys WHERE status = 'PENDING'")
[[ -n $mid ]] || fail "no key PENDING when the owner was killed"

# ---- 2. killed right after an effect, before DONE is recorded ------------------
# (started at once, while the dead owner's lease lives: it must meet it)
DEDUPD_FAULT="in_handler:2" start d2 "$WORK/fast.yaml"
done1=$(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'DONE'")
assert_eq "$(lines_for "$mid")" 0 "sink lines for $mid when its owner (pid $pid1) was killed mid-effect"
assert_eq "$(sql "SELECT owner LIKE '%:$pid1:%' AND lease_until > now() FROM dedupd.keys WHERE idem_key = '$mid'")" t "$mid left under the dead owner's live lease"
log "killed pid $pid1 mid-effect on $mid with $done1 keys DONE"
for ((i = 0; i < 600; i++)); do kill -0 "${PIDS[d2]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${PIDS[d2]}" 2>/dev/null && fail "the second instance still runs after 60 s: the in_handler fault point was not reached twice"
rc=0; wait "${PIDS[d2]}" || rc=$?; unset "PIDS[d2]"
((rc == 137)) || fail "the second instance exited $rc, not by the in_handler fault point's SIGKILL"
grep -q "$mid is PENDING under a live lease" "$WORK/d2.log" || fail "the second instance did not meet $mid's live lease"
grep -q "$mid: the lease of [^ ]*:$pid1:[0-9a-f]* ran out at .*taken over by compare-and-set (attempt 2)" "$WORK/d2.log" ||
        fail "no takeover of $mid in the second instance's log"
wrote=$(sql "SELECT idem_key FROM dedupd.keys WHERE status = 'PENDING'")
[[ -n $wrote && $wrote != *$'\n'* ]] || fail "expected one key PENDING after the second kill, got '$wrote'"
assert_eq "$(lines_for "$wrote")" 1 "sink lines for $wrote, written by the killed second instance before DONE"
log "second instance took $mid over, then was killed after writing $wrote and before DONE"

# ---- 3. a third instance finishes -------------------------------------------
start d3 "$WORK/fast.yaml"
b_wait_done 60
stop d3
b_check_acked

assert_eq "$(sql "SELECT count(*) || '/' || count(*) FILTER (WHERE status = 'DONE') FROM dedupd.keys")" "$KEYS/$KEYS" "keys / keys DONE"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE owner IS NOT NULL OR lease_until IS NOT NULL")" 0 "finished keys keep no owner or lease"
assert_eq "$(wc -l <"$SINK")" "$KEYS" "lines in the sink"
assert_eq "$(cut -f1 "$SINK" | sort | uniq -d | wc -l)" 0 "keys written twice"
assert_eq "$(cut -f1 "$SINK" | sort -u | wc -l)" "$KEYS" "keys written"
if [[ $mid == "$wrote" ]]; then
        assert_eq "$(status_of "$mid")" "DONE 3 already written" "$mid (both kills): status attempts response"
else
        assert_eq "$(status_of "$mid")" "DONE 2 written" "$mid (killed before writing): status attempts response"
        assert_eq "$(status_of "$wrote")" "DONE 2 already written" "$wrote (killed after writing): status attempts response"
fi
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE attempts = 1 AND response = 'written'")" $((KEYS - $(sort -u <<<"$mid
$wrote" | wc -l))) "the other keys: written once at the first attempt"
log "ok: $KEYS keys, each line once, all DONE; $(sql "SELECT sum(applied) || ' applied, ' || sum(duplicates) || ' duplicates, ' || max(next_offset) || ' committed' FROM dedupd.offsets WHERE topic = '$NAME_B'")"
