#!/usr/bin/env bash
# External-effect mode (docs/design.md §6) with the file sink: duplicates write once;
# an owner killed mid-effect leaves a live lease that a second instance waits
# out without acknowledging, then takes over by compare-and-set; a finisher
# that lost its lease never overwrites the new owner's row; the reaper marks
# long-expired PENDING keys EXPIRED and on_expired decides what their next
# message gets; handler RETRY releases the lease and is dead-lettered after
# the budget; a message that stops its partition does not hold back the
# acknowledgement of what was finished before it.
. "$(dirname "$0")/lib.sh"

# ext_config FILE TOPIC SINK DELAY_MS LEASE ON_EXPIRED INSTANCE [HANDLER_YAML]
ext_config() {
        local file=$1 t=$2 sink=$3 delay=$4 lease=$5 policy=$6 inst=$7 handler=${8:-}
        if [[ -z $handler ]]; then
                handler="path: \"$BUILD/filesink.so\"
      config: {path: \"$sink\", delay_ms: \"$delay\"}"
        fi
        cat >"$file" <<EOF
namespace: it-$ID
shutdown_timeout_ms: 15000
postgres: {conninfo: "$TEST_DSN", retry_max_ms: 1000}
kafka:
  bootstrap.servers: "$KAFKA_BOOTSTRAP"
  group.id: "grp-$ID-$t"
  group.instance.id: "$inst"
  session.timeout.ms: "6000"
  heartbeat.interval.ms: "500"
  topic.metadata.refresh.interval.ms: "2000"
topics:
  - name: $t
    mode: external
    external: {lease_ms: $lease, on_expired: $policy}
    key: {subject: "{json:id}", action: WRITE}
    handler:
      $handler
    batch: {max_messages: 100, max_wait_ms: 20}
    retry: {max_attempts: 3, backoff_ms: 50, backoff_max_ms: 500}
EOF
}

# wait_sql QUERY EXPECTED SECONDS WHAT
wait_sql() {
        local got=
        for ((i = 0; i < $3 * 10; i++)); do
                got=$(sql "$1" 2>/dev/null || true)
                [[ $got == "$2" ]] && return 0
                sleep 0.1
        done
        fail "timed out waiting for $4: expected '$2', got '$got'"
}

# wait_log NAME PATTERN SECONDS
wait_log() {
        for ((i = 0; i < $3 * 10; i++)); do
                grep -q -- "$2" "$WORK/$1.log" 2>/dev/null && return 0
                sleep 0.1
        done
        fail "timed out waiting for '$2' in the log of $1"
}

row_full() { sql "SELECT status, coalesce(owner, '-'), attempts, coalesce(lease_until::text, '-'), coalesce(response, '-') FROM dedupd.keys WHERE idem_key = '$1'"; }
row() { sql "SELECT status, coalesce(owner, '-'), attempts, coalesce(response, '-') FROM dedupd.keys WHERE idem_key = '$1'" | tr '|' ' '; }
lines_for() { grep -c "^$1	" "$2" || true; }
lag_of() { "$KT" offsets -t "$1" -g "grp-$ID-$1" | awk '$1=="total"{print $4}'; }
committed_of() { "$KT" offsets -t "$1" -g "grp-$ID-$1" | awk '$1=="0"{print $4}'; }

# ---- (a) duplicates: each key DONE, each line in the sink once ----------------
TA="ext_dups_$$"
topic "$TA" 2
ext_config "$WORK/a.yaml" "$TA" "$WORK/a.sink" 0 10000 dead-letter "ext-a-$$"
i=0
for id in a1 a2 a3 a1 a4 a2 a5 a1; do
        i=$((i + 1))
        printf 'k%d\t{"id":"%s","n":%d}\n' "$i" "$id" "$i"
done | "$KT" produce -t "$TA"
start da "$WORK/a.yaml"
wait_done "$TA"
stop da
assert_eq "$(sql "SELECT string_agg(idem_key || '=' || status || '/' || attempts, ',' ORDER BY idem_key) FROM dedupd.keys")" \
        "a1/WRITE=DONE/1,a2/WRITE=DONE/1,a3/WRITE=DONE/1,a4/WRITE=DONE/1,a5/WRITE=DONE/1" "(a) keys, statuses, attempts"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE owner IS NOT NULL OR lease_until IS NOT NULL")" 0 "(a) finished keys keep no owner or lease"
assert_eq "$(wc -l <"$WORK/a.sink")" 5 "(a) lines in the sink"
assert_eq "$(cut -f1 "$WORK/a.sink" | sort | uniq -d | wc -l)" 0 "(a) keys written twice"
assert_eq "$(sql "SELECT sum(applied) || '/' || sum(duplicates) FROM dedupd.offsets WHERE topic = '$TA'")" "5/3" "(a) applied/duplicates counted"
assert_eq "$(lag_of "$TA")" 0 "(a) Kafka consumer lag"

# ---- (b) owner killed mid-effect: live lease waited out, then taken over ------
TB="ext_takeover_$$"
topic "$TB" 1
ext_config "$WORK/b1.yaml" "$TB" "$WORK/b.sink" 20000 10000 dead-letter "ext-b-$$"
ext_config "$WORK/b2.yaml" "$TB" "$WORK/b.sink" 0 10000 dead-letter "ext-b-$$"
printf '{"id":"b1"}\n' | "$KT" produce -t "$TB"
start b1 "$WORK/b1.yaml"
pid1=${PIDS[b1]}
wait_sql "SELECT status FROM dedupd.keys WHERE idem_key = 'b1/WRITE'" PENDING 60 "b1/WRITE claimed by the first instance"
before=$(row b1/WRITE)
before_full=$(row_full b1/WRITE)
crash b1 # kill -9 while the handler sleeps before writing
start b2 "$WORK/b2.yaml"
log "killed the owner (pid $pid1) mid-effect; second instance started"
wait_log b2 "b1/WRITE is PENDING under a live lease" 9
during=$(row b1/WRITE)
[[ $during == "PENDING "*":$pid1:"*" 1 -" ]] || fail "(b) while the lease lives the row must stay the dead owner's: $during"
log "ok: (b) the live lease was met and left alone: $during"
assert_eq "$(sql "SELECT coalesce(max(next_offset), 0) FROM dedupd.offsets WHERE topic = '$TB'")" 0 "(b) database position while the lease lives"
c=$(committed_of "$TB")
((c < 1)) || fail "(b) Kafka committed offset $c passed the message while its lease lived"
log "ok: (b) Kafka committed offset while the lease lives = $c (nothing acknowledged)"
wait_sql "SELECT status FROM dedupd.keys WHERE idem_key = 'b1/WRITE'" DONE 30 "b1/WRITE taken over and finished"
after=$(row b1/WRITE)
after_full=$(row_full b1/WRITE)
assert_eq "$after" "DONE - 2 written" "(b) row after the takeover (status owner attempts response)"
assert_eq "$(lines_for b1/WRITE "$WORK/b.sink")" 1 "(b) sink lines for b1/WRITE"
grep -q "b1/WRITE: the lease of [^ ]*:$pid1:[0-9a-f]* ran out at .*taken over by compare-and-set (attempt 2)" "$WORK/b2.log" ||
        fail "(b) no takeover line in the log"

# (b2) an owner that wrote and died before finishing: the sink knows the key.
printf 'b2/WRITE\t{"id":"b2"}\n' >>"$WORK/b.sink"
sql "INSERT INTO dedupd.keys (namespace, idem_key, status, topic, partition, \"offset\", attempts, owner, lease_until)
     VALUES ('it-$ID', 'b2/WRITE', 'PENDING', '$TB', 0, 1, 1, 'gone:1:00000000', now() - interval '1 second')"
printf '{"id":"b2"}\n' | "$KT" produce -t "$TB"
wait_done "$TB" 60
assert_eq "$(row b2/WRITE)" "DONE - 2 already written" "(b2) row after taking over an owner that wrote and died"
assert_eq "$(lines_for b2/WRITE "$WORK/b.sink")" 1 "(b2) sink lines for b2/WRITE (the downstream dedup by key)"
stop b2
assert_eq "$(lag_of "$TB")" 0 "(b) Kafka consumer lag"
log "---- takeover transcript (status|owner|attempts|lease_until|response)"
log "row while the first owner (pid $pid1) sleeps in the handler: $before_full"
grep -E "b1/WRITE|assigned" "$WORK/b2.log" | awk '!/retrying in/ || !seen++' | sed 's/^/    /' | head -n 8
log "live-lease retries before the takeover: $(grep -c "b1/WRITE is PENDING under a live lease" "$WORK/b2.log")"
log "row after: $after_full"

# ---- (c) a finisher that lost its lease never overwrites ----------------------
TC="ext_lost_$$"
topic "$TC" 1
ext_config "$WORK/c.yaml" "$TC" "$WORK/c.sink" 3000 30000 dead-letter "ext-c-$$"
printf '{"id":"c1"}\n' | "$KT" produce -t "$TC"
start dc "$WORK/c.yaml"
wait_sql "SELECT status FROM dedupd.keys WHERE idem_key = 'c1/WRITE'" PENDING 60 "c1/WRITE claimed"
# Another instance takes the key over while the handler sleeps.
sql "UPDATE dedupd.keys SET owner = 'intruder:1:feedface', attempts = attempts + 1 WHERE idem_key = 'c1/WRITE'"
wait_log dc "c1/WRITE: lost lease" 30
wait_done "$TC" 30
stop dc
assert_eq "$(row c1/WRITE)" "PENDING intruder:1:feedface 2 -" "(c) the new owner's row, not overwritten"
assert_eq "$(lines_for c1/WRITE "$WORK/c.sink")" 1 "(c) sink lines for c1/WRITE"
grep -q "ERROR.*c1/WRITE: lost lease" "$WORK/dc.log" || fail "(c) the lost lease was not logged as an ERROR"

# ---- (d) the reaper, and what an EXPIRED key's next message gets ---------------
TD="ext_expired_$$"
topic "$TD" 1
for p in dead-letter skip reexecute; do
        ext_config "$WORK/d-$p.yaml" "$TD" "$WORK/d.sink" 0 30000 "$p" "ext-d-$$"
        # on_expired alone: the file sink's reconcile() has its own test (external_reconcile)
        sed -i "s/on_expired: $p}/on_expired: $p, reconcile: false}/" "$WORK/d-$p.yaml"
done
for k in d1 d2 d3; do
        sql "INSERT INTO dedupd.keys (namespace, idem_key, status, topic, partition, \"offset\", attempts, owner, lease_until)
             VALUES ('it-$ID', '$k/WRITE', 'PENDING', '$TD', 0, 0, 1, 'gone:1:00000000', now() - interval '1 hour')"
done
# Lease over a minute ago: within expire_after (10m), so not in doubt yet.
sql "INSERT INTO dedupd.keys (namespace, idem_key, status, topic, partition, \"offset\", attempts, owner, lease_until)
     VALUES ('it-$ID', 'd4/WRITE', 'PENDING', '$TD', 0, 0, 1, 'gone:1:00000000', now() - interval '1 minute')"
start dd1 "$WORK/d-dead-letter.yaml"
wait_log dd1 "reaper: 3 PENDING keys" 30
assert_eq "$(sql "SELECT string_agg(idem_key || '=' || status || '/' || coalesce(owner, '-'), ',' ORDER BY idem_key) FROM dedupd.keys WHERE topic = '$TD'")" \
        "d1/WRITE=EXPIRED/-,d2/WRITE=EXPIRED/-,d3/WRITE=EXPIRED/-,d4/WRITE=PENDING/gone:1:00000000" "(d) reaped rows (kept, not deleted)"
printf '{"id":"d1"}\n' | "$KT" produce -t "$TD"
wait_done "$TD" 60
stop dd1
"$KT" dump -t "$TD.dlq" >"$WORK/d.dlq"
grep -q "dedupd.reason=in doubt: EXPIRED key, effect may or may not have happened; reconcile" "$WORK/d.dlq" ||
        fail "(d) no in-doubt dead letter"
grep -q "dedupd.key=d1/WRITE" "$WORK/d.dlq" || fail "(d) d1/WRITE not dead-lettered"
log "ok: (d) on_expired dead-letter: d1/WRITE dead-lettered with the in-doubt reason"

start dd2 "$WORK/d-skip.yaml"
printf '{"id":"d2"}\n' | "$KT" produce -t "$TD"
wait_done "$TD" 60
stop dd2
grep -q "d2/WRITE is EXPIRED (in doubt): acknowledged without running the handler (on_expired: skip)" "$WORK/dd2.log" ||
        fail "(d) skip not logged"

start dd3 "$WORK/d-reexecute.yaml"
printf '{"id":"d3"}\n{"id":"d4"}\n' | "$KT" produce -t "$TD"
wait_done "$TD" 60
stop dd3
assert_eq "$(sql "SELECT string_agg(idem_key || '=' || status || '/' || attempts, ',' ORDER BY idem_key) FROM dedupd.keys WHERE topic = '$TD'")" \
        "d1/WRITE=EXPIRED/1,d2/WRITE=EXPIRED/1,d3/WRITE=DONE/2,d4/WRITE=DONE/2" "(d) after dead-letter, skip, reexecute (and d4's plain takeover)"
assert_eq "$(cut -f1 "$WORK/d.sink" | sort | tr '\n' ' ')" "d3/WRITE d4/WRITE " "(d) sink lines (skipped and dead-lettered keys never ran)"
assert_eq "$(sql "SELECT sum(consumed) || '/' || sum(applied) || '/' || sum(duplicates) || '/' || sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$TD'")" \
        "4/2/1/1" "(d) consumed/applied/duplicates(skipped)/dead-lettered"
assert_eq "$(lag_of "$TD")" 0 "(d) Kafka consumer lag"

# ---- (e) handler RETRY: lease released, retried, dead-lettered after the budget --
TE="ext_retry_$$"
topic "$TE" 1
ext_config "$WORK/e.yaml" "$TE" - 0 30000 dead-letter "ext-e-$$" "path: \"$BUILD/tests/flaky.so\"
      config: {retry_keys: e1/WRITE, flap_keys: e2/WRITE}"
for id in e0 e1 e2 e3; do printf '{"id":"%s"}\n' "$id"; done | "$KT" produce -t "$TE"
start de "$WORK/e.yaml"
wait_done "$TE" 60
stop de
assert_eq "$(sql "SELECT string_agg(idem_key || '=' || status || '/' || attempts, ',' ORDER BY idem_key) FROM dedupd.keys WHERE topic = '$TE'")" \
        "e0/WRITE=DONE/1,e1/WRITE=PENDING/3,e2/WRITE=DONE/3,e3/WRITE=DONE/1" "(e) keys after RETRY (e1 released, left for the reaper)"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE idem_key = 'e1/WRITE' AND lease_until <= now()")" 1 "(e) e1's lease released"
assert_eq "$(sql "SELECT string_agg(idem_key, ',' ORDER BY idem_key) FROM flaky_effects")" "e0/WRITE,e2/WRITE,e3/WRITE" "(e) effects"
"$KT" dump -t "$TE.dlq" >"$WORK/e.dlq"
assert_eq "$(grep -c 'dedupd.reason=handler returned RETRY 3 times' "$WORK/e.dlq")" 1 "(e) dead-lettered after the retry budget"
assert_eq "$(lag_of "$TE")" 0 "(e) Kafka consumer lag"

# ---- (f) a partial batch: what was finished before a stopped message is acknowledged --
TF="ext_partial_$$"
topic "$TF" 1
ext_config "$WORK/f.yaml" "$TF" - 0 30000 dead-letter "ext-f-$$" "path: \"$BUILD/tests/flaky.so\"
      config: {retry_keys: f1/WRITE}"
sed -i 's/max_attempts: 3/max_attempts: 1000/' "$WORK/f.yaml"
for id in f0 f1 f2; do printf '{"id":"%s"}\n' "$id"; done | "$KT" produce -t "$TF"
start df "$WORK/f.yaml"
wait_sql "SELECT next_offset FROM dedupd.offsets WHERE topic = '$TF'" 1 60 "f0's progress while f1 retries"
for ((i = 0; i < 100; i++)); do
        [[ $(committed_of "$TF") == 1 ]] && break
        sleep 0.1
done
assert_eq "$(committed_of "$TF")" 1 "(f) Kafka committed offset while f1 retries (f0 acknowledged, f1 not)"
wait_sql "SELECT attempts > 3 FROM dedupd.keys WHERE idem_key = 'f1/WRITE'" t 30 "f1 retried"
assert_eq "$(sql "SELECT string_agg(idem_key || '=' || status, ',' ORDER BY idem_key) FROM dedupd.keys WHERE topic = '$TF'")" \
        "f0/WRITE=DONE,f1/WRITE=PENDING" "(f) f2 waits behind f1 in its partition"
stop df
assert_eq "$(sql "SELECT next_offset FROM dedupd.offsets WHERE topic = '$TF'")" 1 "(f) database position after stopping"
