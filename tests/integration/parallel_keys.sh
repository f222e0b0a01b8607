#!/usr/bin/env bash
# Parallel keys inside a partition (issue 21 §3, docs/parallel-keys.md): one
# Kafka partition, `parallel: {key: "{json:user_id}", workers: 4}`, the slow
# fixture handler (2 ms of simulated I/O a message, each effect recorded with
# its offset in slow_effects, in the order effects were written: id).
#   1. every effect once, each user's effects in offset order, the committed
#      offset at the end of the topic (dedupd.offsets and Kafka's), every
#      worker's position written;
#   2. killed right after one worker's COMMIT (fault point
#      after_worker_commit): that worker's effects are above the partition's
#      position; a restart re-delivers them, the dedup table absorbs them:
#      every effect once, the offset at the end;
#   3. killed after every worker committed and before the partition's
#      position moved (before_parallel_settle): the restart resumes from the
#      least of the workers' positions, not from the stale one;
#   4. a poison message (the handler always answers RETRY) is dead-lettered
#      after retry.max_attempts; every other message, of its worker and of
#      the others, is applied.
. "$(dirname "$0")/lib.sh"
require_fault_points

USERS=20

# conf NAME [RETRY]: a config for topic NAME, group of its own
conf() {
        cat >"$WORK/$1.yaml" <<YAML
$(config_head)
kafka:
  bootstrap.servers: "$KAFKA_BOOTSTRAP"
  group.id: "grp-$ID-$1"
  session.timeout.ms: "6000"
  heartbeat.interval.ms: "500"
topics:
  - name: $1
    key: {subject: "{json:order_id}", action: PAY}
    handler:
      path: "$BUILD/tests/slow.so"
      config: {sleep_us: "2000"}
    batch: {max_messages: 100, max_wait_ms: 20}
    retry: {max_attempts: ${2:-5}, backoff_ms: 20, backoff_max_ms: 100}
    parallel: {key: "{json:user_id}", workers: 4}
YAML
}

# produce NAME PREFIX COUNT [EXTRA_JSON_FOR_ONE]: COUNT payments PREFIX1.. of users 1..USERS, then a
# tenth of them again (redeliveries); the one numbered POISON (when set) poisoned
produce() {
        topic "$1" 1
        awk -v p="$2" -v n="$3" -v u="$USERS" -v bad="${POISON:-0}" 'BEGIN {
                for (i = 1; i <= n; i++) printf "{\"order_id\":\"%s%d\",\"user_id\":%d%s}\n", p, i, i % u + 1, i == bad ? ",\"poison\":true" : "";
                for (i = 1; i <= n; i += 10) printf "{\"order_id\":\"%s%d\",\"user_id\":%d%s}\n", p, i, i % u + 1, i == bad ? ",\"poison\":true" : "";
        }' | "$KT" produce -t "$1" >/dev/null
}

committed() { sql "SELECT coalesce(max(next_offset), -1) FROM dedupd.offsets WHERE topic = '$1'"; }
is_committed() { [[ $(committed "$1") == "$2" ]]; }
exited() { ! kill -0 "${PIDS[$1]}" 2>/dev/null; }

# effects_ok PREFIX DISTINCT: every key once, each user's effects by offset
effects_ok() {
        assert_eq "$(sql "SELECT count(*) FROM slow_effects WHERE idem_key LIKE '$1%'")" "$2" "$1: effects"
        assert_eq "$(sql "SELECT count(DISTINCT idem_key) FROM slow_effects WHERE idem_key LIKE '$1%'")" "$2" "$1: distinct keys with an effect"
        assert_eq "$(sql "SELECT count(*) FROM (SELECT \"offset\" < lag(\"offset\") OVER (PARTITION BY user_id ORDER BY id) AS back
                          FROM slow_effects WHERE idem_key LIKE '$1%') s WHERE back")" 0 "$1: effects of a user out of offset order"
}

# at_end NAME: dedupd.offsets and the group's Kafka offset at the end of the topic
at_end() {
        local end
        end=$(produced "$1")
        poll 30 is_committed "$1" "$end" || fail "$1: dedupd.offsets at $(committed "$1"), the topic ends at $end"
        log "ok: $1: dedupd.offsets at the end of the topic ($end)"
        poll 20 bash -c "[[ \$('$KT' offsets -t '$1' -g 'grp-$ID-$1' | awk '\$1==\"total\"{print \$4}') == 0 ]]" ||
                fail "$1: Kafka's committed offset is behind: lag $("$KT" offsets -t "$1" -g "grp-$ID-$1")"
        log "ok: $1: Kafka's committed offset at the end (lag 0)"
}

# 0. dedupctl check: each mistake with file:line:column
cat >"$WORK/bad.yaml" <<YAML
$(config_head)
kafka: {bootstrap.servers: "$KAFKA_BOOTSTRAP", group.id: "grp-$ID-bad"}
topics:
  - name: a
    key: {subject: "{json:order_id}", action: PAY}
    handler: {path: "$BUILD/tests/slow.so"}
    parallel: {key: "{json:user_id", workers: 65}
  - name: b
    key: {subject: "{json:order_id}", action: PAY}
    handler: {path: "$BUILD/tests/slow.so"}
    mode: external
    parallel: {key: "{json:user_id}", workers: 4}
YAML
rc=0
"$DEDUPCTL" check --offline -c "$WORK/bad.yaml" >"$WORK/bad.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "dedupctl check of a bad parallel: section"
for want in ":12:21: 'topics\[0\].parallel.key': unterminated" ":12:47: 'topics\[0\].parallel.workers': 65 is out of range \[1, 64\]" \
        ":13:5: topic 'b': external mode runs on one connection: parallel.workers must be 1"; do
        grep -q "$want" "$WORK/bad.out" || fail "dedupctl check did not say '$want': $(cat "$WORK/bad.out")"
done

# 1. the happy path
t1="par_order_$$"
conf "$t1"
produce "$t1" a 400
start one "$WORK/$t1.yaml"
poll 90 is_committed "$t1" "$(produced "$t1")" || fail "$t1: committed $(committed "$t1") of $(produced "$t1")"
stop one
effects_ok a 400
at_end "$t1"
assert_eq "$(sql "SELECT count(DISTINCT worker) FROM dedupd.parallel_positions WHERE topic = '$t1'")" 4 "$t1: workers with a position"
grep -q "parallel keys: 4 database connection(s) for batches (1 lane(s) x 4 parallel workers)" "$WORK/one.log" ||
        fail "$t1: dedupd did not say how many connections parallel keys take"

# 2. killed right after one worker's COMMIT
t2="par_crash_$$"
conf "$t2"
produce "$t2" b 400
DEDUPD_FAULT=after_worker_commit:6 start two "$WORK/$t2.yaml"
poll 60 exited two || fail "$t2: the fault point never fired"
crash two
grep -q "fault point after_worker_commit reached" "$WORK/two.log" || fail "$t2: killed, but not at the fault point"
pos=$(committed "$t2")
above=$(sql "SELECT count(*) FROM slow_effects e JOIN dedupd.keys k USING (idem_key) WHERE e.idem_key LIKE 'b%' AND e.\"offset\" >= $pos")
((above > 0)) || fail "$t2: no effect committed above the partition's position $pos: the crash did not fall between the workers' commits"
log "ok: $t2: killed with $above effect(s) committed above the partition's position $pos"
start two2 "$WORK/$t2.yaml"
poll 90 is_committed "$t2" "$(produced "$t2")" || fail "$t2: committed $(committed "$t2") of $(produced "$t2") after the restart"
stop two2
effects_ok b 400
at_end "$t2"

# 3. killed after every worker committed, before the partition moved
t3="par_settle_$$"
conf "$t3"
produce "$t3" c 400
DEDUPD_FAULT=before_parallel_settle:2 start three "$WORK/$t3.yaml"
poll 60 exited three || fail "$t3: the fault point never fired"
crash three
least=$(sql "SELECT min(next_offset) FROM dedupd.parallel_positions WHERE topic = '$t3'")
pos=$(committed "$t3")
((least > pos)) || fail "$t3: the workers' least position $least is not above the partition's $pos"
start three2 "$WORK/$t3.yaml"
poll 90 is_committed "$t3" "$(produced "$t3")" || fail "$t3: committed $(committed "$t3") of $(produced "$t3") after the restart"
stop three2
grep -q "positioned at offset $least\|starting at offset $least (database)" "$WORK/three2.log" ||
        fail "$t3: the restart did not resume at the workers' least position $least (the partition's was $pos): $(grep -E 'offset|parallel' "$WORK/three2.log" | head -5)"
log "ok: $t3: resumed at $least, the least of the workers' positions (the partition's was $pos)"
effects_ok c 400
at_end "$t3"

# 4. a poison message in one worker's share
t4="par_poison_$$"
conf "$t4" 2
POISON=57 produce "$t4" d 200
start four "$WORK/$t4.yaml"
poll 90 is_committed "$t4" "$(produced "$t4")" || fail "$t4: committed $(committed "$t4") of $(produced "$t4")"
stop four
effects_ok d 199
assert_eq "$(sql "SELECT count(*) FROM slow_effects WHERE idem_key = 'd57/PAY'")" 0 "$t4: effects of the poison message"
assert_eq "$("$KT" offsets -t "$t4.dlq" | awk '$1=="total"{print $2}')" 1 "$t4: dead letters"
grep -q "offset 56 dead-lettered to $t4.dlq" "$WORK/four.log" || fail "$t4: the poison message (offset 56) was not dead-lettered"
at_end "$t4"
