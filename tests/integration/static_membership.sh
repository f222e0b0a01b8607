#!/usr/bin/env bash
# Static membership (KIP-345, group.instance.id): an instance killed -9 and
# restarted at once with the same id gets its partitions back and commits
# again long before session.timeout.ms (45 s, librdkafka's default) runs out;
# without the id the same restart waits for the dead member's session to
# expire. Both gaps (kill -> first batch committed after the restart) are
# measured and printed. And a clean stop of a static member does not leave
# the group (no LeaveGroup, KIP-345), where a dynamic member does.
. "$(dirname "$0")/lib.sh"

SESSION_MS=45000

# orders TOPIC FROM TO: produce orders FROM..TO of that topic, one each
orders() { seq "$2" "$3" | awk -v t="$1" '{printf "{\"order_id\":\"%s-%d\",\"user_id\":%d,\"amount\":1}\n", t, $1, $1 % 50 + 1}' | "$KT" produce -t "$1"; }

now_ms() { date +%s%3N; }

# static_config FILE TOPIC GROUP [INSTANCE_ID]
static_config() {
        write_config "$1" "$2"
        sed -i -e "s/session.timeout.ms: \"6000\"/session.timeout.ms: \"$SESSION_MS\"/" \
                -e "s/group.id: \"grp-$ID\"/group.id: \"$3\"/" \
                -e "s/^shutdown_timeout_ms:/startup_timeout_ms: 120000\nshutdown_timeout_ms:/" "$1"
        [[ -z ${4:-} ]] || sed -i "s/^  group.id: .*/&\n  group.instance.id: \"$4\"/" "$1"
}

# restart_gap NAME CONFIG TOPIC: run until caught up, kill -9, produce more,
# restart at once; GAP: the milliseconds from the kill to the first batch the
# restarted instance committed
restart_gap() {
        local name=$1 cfg=$2 t=$3 killed first
        orders "$t" 1 100
        start "$name" "$cfg"
        wait_done "$t" 60
        crash "$name"
        killed=$(now_ms)
        orders "$t" 101 150
        start "$name" "$cfg"
        wait_done "$t" 180
        first=$(sql "SELECT (extract(epoch FROM min(committed_at)) * 1000)::bigint FROM dedupd.progress_log
                     WHERE topic = '$t' AND committed_at > to_timestamp($killed / 1000.0)")
        [[ -n $first ]] || fail "$name: no batch committed after the restart"
        GAP=$((first - killed))
}

TS="pay_static_$$" TD="pay_dynamic_$$"
topic "$TS" 2
topic "$TD" 2
static_config "$WORK/static.yaml" "$TS" "grp-$ID-static" "dedupd-$ID-1"
static_config "$WORK/dynamic.yaml" "$TD" "grp-$ID-dynamic"

restart_gap s "$WORK/static.yaml" "$TS"
static_ms=$GAP
log "static member (group.instance.id): kill -9 -> first batch committed after restart: $static_ms ms"
grep -q "assigned $TS/0" "$WORK/s.log" && grep -q "assigned $TS/1" "$WORK/s.log" || fail "the static member did not get both partitions back"
restart_gap d "$WORK/dynamic.yaml" "$TD"
dynamic_ms=$GAP
log "dynamic member (no group.instance.id): kill -9 -> first batch committed after restart: $dynamic_ms ms"

((static_ms < 20000)) || fail "the static member took $static_ms ms to resume (session.timeout.ms $SESSION_MS)"
log "ok: the static member resumed in $static_ms ms, well before session.timeout.ms ($SESSION_MS ms)"
# The dynamic restart waits for the dead member's session: the static gap is not just a fast machine.
((dynamic_ms > 30000)) || fail "without group.instance.id the restart took only $dynamic_ms ms: the comparison proves nothing"
log "ok: without group.instance.id the same restart waited $dynamic_ms ms for the session to expire"

# Every order applied once, whatever the kills.
for t in "$TS" "$TD"; do
        assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE topic = '$t' AND status = 'DONE'")" 150 "orders of $t applied"
done
assert_eq "$(sql "SELECT count(*) FROM (SELECT idem_key FROM transfer_ledger GROUP BY idem_key HAVING count(*) > 1) d")" 0 \
        "keys with more than one effect"

# A clean stop: the dynamic member leaves its group, the static one stays a
# member until its session ends (what a replay or a scale-down then meets).
stop d
stop s
rc=0
"$DEDUPCTL" replay -c "$WORK/dynamic.yaml" --topic "$TD" --to-beginning --dry-run >"$WORK/rd.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "replay --dry-run right after a dynamic member's clean stop"
rc=0
"$DEDUPCTL" replay -c "$WORK/static.yaml" --topic "$TS" --to-beginning --dry-run >"$WORK/rs.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "replay --dry-run right after a static member's clean stop"
grep -q "has active members" "$WORK/rs.out" || fail "replay said: $(cat "$WORK/rs.out")"
log "ok: a static member's clean stop keeps it in the group until session.timeout.ms; a dynamic one leaves"
