#!/usr/bin/env bash
# reconcile() (issue 21 §4): external mode, keys left in doubt by an owner
# that died before recording an outcome. The file sink's reconcile() looks
# the key up in its file. (a) The reaper marks them EXPIRED and asks at
# once: a key whose effect happened becomes DONE and its redelivery is
# absorbed (no second line); one whose effect did not becomes PENDING and
# its redelivery runs it, once; nothing is dead-lettered. (b) A message that
# meets an EXPIRED key the reaper does not look after asks reconcile()
# itself, before on_expired. (c) A downstream that cannot answer (the sink
# unreadable): the key is asked external.reconcile_tries times, then its
# message gets on_expired (dead-lettered in doubt) as without reconcile().
# dedupd_reconcile_total counts each answer.
. "$(dirname "$0")/lib.sh"

T="ext_reconcile_$$"
topic "$T" 1

# rc_config FILE SINK INSTANCE
rc_config() {
        cat >"$1" <<YAML
$(config_head)
kafka:
  bootstrap.servers: "$KAFKA_BOOTSTRAP"
  group.id: "grp-$ID"
  group.instance.id: "$3"
  session.timeout.ms: "6000"
http: {listen: "127.0.0.1:0"}
topics:
  - name: $T
    mode: external
    external: {lease_ms: 10000, on_expired: dead-letter, reconcile_tries: 2, reconcile_budget: 10}
    key: {subject: "{json:id}", action: WRITE}
    handler:
      path: "$BUILD/filesink.so"
      config: {path: "$2"}
    batch: {max_messages: 100, max_wait_ms: 20}
YAML
}

# in_doubt KEY STATUS TOPIC: a row as an owner that died mid-effect leaves it
in_doubt() {
        sql "INSERT INTO dedupd.keys (namespace, idem_key, status, topic, partition, \"offset\", attempts, owner, lease_until)
             VALUES ('it-$ID', '$1', '$2', '$3', 0, 0, 1, CASE WHEN '$2' = 'PENDING' THEN 'gone:1:00000000' END,
                     now() - interval '1 hour')"
}
row() { sql "SELECT status || '/' || attempts || '/' || reconciled || '/' || coalesce(response, '-') FROM dedupd.keys WHERE idem_key = '$1'"; }
lines_for() { grep -c "^$1	" "$2" || true; }
metric() { curl -s "http://$ADDR/metrics" | awk -v m="dedupd_reconcile_total{topic=\"$T\",answer=\"$1\"}" '$1 == m {print $2}'; }
row_is() { [[ $(row "$1") == "$2" ]]; }

# ---- (a) the reaper asks -------------------------------------------------------
SINK=$WORK/a.sink
rc_config "$WORK/a.yaml" "$SINK" "rc-a-$$"
: >"$SINK"
"$DEDUPCTL" migrate -c "$WORK/a.yaml" >/dev/null
printf 'r1/WRITE\t{"id":"r1"}\n' >"$SINK" # r1's owner wrote, then died
in_doubt r1/WRITE PENDING "$T"
in_doubt r2/WRITE PENDING "$T" # r2's owner died before writing
# (b) An EXPIRED key first claimed from another topic: this topic's reaper leaves it alone.
printf 'x1/WRITE\t{"id":"x1"}\n' >>"$SINK"
in_doubt x1/WRITE EXPIRED "elsewhere_$$"
start a "$WORK/a.yaml"
ADDR=$(metrics_addr a)
poll 30 row_is r1/WRITE "DONE/1/1/already written" || fail "(a) r1 after the reaper: $(row r1/WRITE)"
poll 10 row_is r2/WRITE "PENDING/1/1/-" || fail "(a) r2 after the reaper: $(row r2/WRITE)"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE idem_key = 'r2/WRITE' AND owner IS NULL AND lease_until <= now()")" 1 \
        "(a) r2 left for its next message (no owner, lease run out)"
grep -q "key r1/WRITE was in doubt (attempt 1, offset 0): reconcile() says done: already written" "$WORK/a.log" ||
        fail "(a) no reconcile line for r1 in the log"
printf '{"id":"r1"}\n{"id":"r2"}\n{"id":"x1"}\n{"id":"n1"}\n' | "$KT" produce -t "$T"
wait_done "$T" 60
assert_eq "$(row r1/WRITE)" "DONE/1/1/already written" "(a) r1: its redelivery absorbed"
assert_eq "$(row r2/WRITE)" "DONE/2/1/written" "(a) r2: re-executed by its redelivery, attempt 2"
assert_eq "$(row x1/WRITE)" "DONE/1/1/already written" "(b) x1: reconciled by its message, not dead-lettered"
assert_eq "$(row n1/WRITE)" "DONE/1/0/written" "(a) n1: a fresh key, as ever"
for k in r1 r2 x1 n1; do assert_eq "$(lines_for "$k/WRITE" "$SINK")" 1 "sink lines for $k"; done
assert_eq "$(sql "SELECT sum(applied) || '/' || sum(duplicates) || '/' || sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$T'")" \
        "2/2/0" "(a, b) applied/duplicates/dead-lettered"
assert_eq "$(metric done)" 2 "(a, b) dedupd_reconcile_total answer=done"
assert_eq "$(metric reexecute)" 1 "(a) dedupd_reconcile_total answer=reexecute"
stop a

# ---- (c) a downstream that cannot tell ---------------------------------------------
SINK=$WORK/c.sink
: >"$SINK"
rc_config "$WORK/c.yaml" "$SINK" "rc-c-$$"
start c "$WORK/c.yaml"
ADDR=$(metrics_addr c)
poll 30 grep -q "handler filesink loaded" "$WORK/c.log" || fail "(c) the handler did not load"
rm "$SINK" && mkdir "$SINK" # the file sink stands for a downstream that is away: unreadable
in_doubt u1/WRITE PENDING "$T"
poll 30 row_is u1/WRITE "EXPIRED/1/2/-" || fail "(c) u1 after two rounds: $(row u1/WRITE)"
sleep 6 # one reaper round more: tries spent, not asked again
assert_eq "$(row u1/WRITE)" "EXPIRED/1/2/-" "(c) u1 asked reconcile_tries (2) times, no more"
assert_eq "$(metric unknown)" 2 "(c) dedupd_reconcile_total answer=unknown"
grep -q "key u1/WRITE is in doubt and reconcile() could not tell (try 2 of 2)" "$WORK/c.log" || fail "(c) no 'could not tell' line"
printf '{"id":"u1"}\n' | "$KT" produce -t "$T"
wait_done "$T" 60
stop c
"$KT" dump -t "$T.dlq" >"$WORK/c.dlq"
grep -q "dedupd.reason=in doubt: EXPIRED key, effect may or may not have happened; reconcile" "$WORK/c.dlq" ||
        fail "(c) u1 not dead-lettered in doubt"
assert_eq "$(grep -c "dedupd.key=u1/WRITE" "$WORK/c.dlq")" 1 "(c) u1's dead letters"
log "ok: reconcile() answered done, reexecute and unknown; nothing ran twice, nothing was dead-lettered that the downstream could answer"
