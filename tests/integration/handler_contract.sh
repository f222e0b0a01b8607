#!/usr/bin/env bash
# A handler that breaks its contract cannot end or hijack dedupd's transaction: a COMMIT, a ROLLBACK, or a
# COMMIT then BEGIN inside the handler is that message's failed attempt — the batch rolls back whole, its
# neighbours apply once, the message is dead-lettered after retry.max_attempts with what the handler did, and
# nothing is acknowledged without its effect. A SET ROLE or SET search_path of the handler's does not reach
# dedupd's own statements or the next batch; a response that is not UTF-8 and an emit nowhere are refused at the
# call, and counted once though the batches they ran in rolled back and ran again. Once per message (handle) and
# once set-oriented (handle_batch, which names no culprit: the batch is split).
. "$(dirname "$0")/lib.sh"

# A role that may write the handler's table but nothing of dedupd's.
ROLE="rogue_nobody_$$"
psql "$PG_DSN" -X -q -c "CREATE ROLE $ROLE NOLOGIN" >/dev/null
on_exit "psql \"\$TEST_DSN\" -X -q -c 'DROP OWNED BY $ROLE' >/dev/null 2>&1; psql \"\$PG_DSN\" -X -q -c 'DROP ROLE IF EXISTS $ROLE' >/dev/null"
sql "CREATE TABLE rogue_effects (idem_key text NOT NULL, seen_user text NOT NULL, seen_search_path text NOT NULL);
     GRANT SELECT, INSERT ON rogue_effects TO $ROLE"
LOGIN=$(sql "SELECT session_user")
DEFAULT_PATH=$(sql "SELECT current_setting('search_path')")
BAD="c1/PAY r1/PAY cb1/PAY"

run_case() { # PER_MESSAGE
        local per=$1 T="contract_${1}_$$"
        topic "$T" 1
        cat >"$WORK/$per.yaml" <<YAML
$(config_head | sed "s/^namespace: .*/namespace: it-$ID-$per/")
kafka: {bootstrap.servers: "$KAFKA_BOOTSTRAP", group.id: "grp-$ID-$per"}
http: {listen: "127.0.0.1:0"}
topics:
  - name: $T
    key: {subject: "{json:order_id}", action: PAY}
    handler:
      path: "$BUILD/tests/rogue.so"
      per_message: $per
      config:
        role: $ROLE
        commit_keys: c1/PAY
        rollback_keys: r1/PAY
        commit_begin_keys: cb1/PAY
        set_role_keys: sr1/PAY
        search_path_keys: sp1/PAY
        bad_response_keys: br1/PAY
        bad_emit_keys: be1/PAY
    batch: {max_messages: 50, max_wait_ms: 20}
    retry: {max_attempts: 2, backoff_ms: 20, backoff_max_ms: 100}
YAML
        sql "TRUNCATE rogue_effects" 2>/dev/null || true
        # br1 and be1 first: their refused calls run again in each batch the others roll back.
        { for i in $(seq 1 12); do printf '{"order_id":"m%d"}\n' "$i"; done
          for o in br1 be1 c1 sr1 r1 sp1 cb1; do printf '{"order_id":"%s"}\n' "$o"; done
          for i in $(seq 13 30); do printf '{"order_id":"m%d"}\n' "$i"; done; } | "$KT" produce -t "$T"
        start "d-$per" "$WORK/$per.yaml"
        wait_done "$T" 60
        # The next batch runs on a session that forgot what the last one's handler set.
        for i in $(seq 31 40); do printf '{"order_id":"m%d"}\n' "$i"; done | "$KT" produce -t "$T"
        wait_done "$T" 60
        local addr refusals
        addr=$(metrics_addr "d-$per")
        refusals=$(curl -s "http://$addr/metrics" | awk '$1 ~ /^dedupd_handler_calls_refused_total\{/ {print $1, $2}' | sort)
        stop "d-$per"
        assert_eq "$refusals" 'dedupd_handler_calls_refused_total{call="emit"} 1
dedupd_handler_calls_refused_total{call="set_response"} 1' "per_message=$per: refused calls counted (once each)"

        local ns="it-$ID-$per"
        "$KT" dump -t "$T.dlq" >"$WORK/$per.dlq"
        assert_eq "$(grep -c '^  dedupd.reason=' "$WORK/$per.dlq")" 3 "per_message=$per: dead letters"
        for k in $BAD; do
                grep -q "^  dedupd.key=$k\$" "$WORK/$per.dlq" || fail "per_message=$per: $k not dead-lettered: $(cat "$WORK/$per.dlq")"
        done
        assert_eq "$(grep '^  dedupd.reason=' "$WORK/$per.dlq" | grep -vc "handler .*dedupd's .* 2 times (retry.max_attempts)")" 0 \
                "per_message=$per: dead letters whose reason is not what the handler did"
        assert_eq "$(sql "SELECT count(*) FROM rogue_effects WHERE idem_key IN ('c1/PAY','r1/PAY','cb1/PAY')")" 0 \
                "per_message=$per: effects of the messages that ended the transaction"
        assert_eq "$(sql "SELECT count(*) FROM (SELECT idem_key FROM rogue_effects GROUP BY 1 HAVING count(*) > 1) d")" 0 \
                "per_message=$per: keys with more than one effect"
        assert_eq "$(sql "SELECT count(DISTINCT idem_key) FROM rogue_effects")" 44 "per_message=$per: effects (47 keys but the 3)"
        assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$ns' AND topic = '$T' AND status = 'DONE'")" 44 \
                "per_message=$per: DONE keys"
        assert_eq "$(sql "SELECT count(*) FROM dedupd.keys k WHERE topic = '$T' AND NOT EXISTS
                           (SELECT 1 FROM rogue_effects e WHERE e.idem_key = k.idem_key)")" 0 \
                "per_message=$per: keys recorded without their effect (acknowledged with no effect)"
        assert_eq "$(sql "SELECT count(*) FROM rogue_effects WHERE idem_key ~ '^m(3[1-9]|40)/' AND
                           (seen_user <> '$LOGIN' OR seen_search_path <> '$DEFAULT_PATH')")" 0 \
                "per_message=$per: later batches that ran with the handler's role or search_path"
        assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE topic = '$T' AND idem_key = 'br1/PAY' AND status = 'DONE' AND response IS NULL")" 1 \
                "per_message=$per: the message whose response was refused, applied without one"
        grep -q "set_response for key br1/PAY: the response is not UTF-8 text: refused" "$WORK/d-$per.log" ||
                fail "per_message=$per: the refused response was not logged"
        grep -q "emit for key be1/PAY refused" "$WORK/d-$per.log" || fail "per_message=$per: the refused emit was not logged"
        assert_eq "$("$KT" offsets -t "$T" -g "grp-$ID-$per" | awk '$1=="total"{print $4}')" 0 "per_message=$per: Kafka consumer lag"
}

run_case true
run_case false
grep -q "no message of it was named" "$WORK/d-false.log" || fail "handle_batch: the batch was not split"
log "ok: COMMIT, ROLLBACK and COMMIT+BEGIN in a handler cost only their message; SET ROLE and search_path stay in their batch"

# workers: 2 asks for handle() on several threads at once: a handler that does
# not declare DEDUPD_HANDLER_F_CONCURRENT (filesink) is refused at start,
# exit 2, with its topic and what to do; nothing is consumed.
TW="contract_workers_$$"
topic "$TW" 2
cat >"$WORK/w2.yaml" <<YAML
$(WORKERS=2 config_head)
kafka: {bootstrap.servers: "$KAFKA_BOOTSTRAP", group.id: "grp-$ID-w2"}
topics:
  - name: $TW
    key: {subject: "{json:id}", action: WRITE}
    handler:
      path: "$BUILD/filesink.so"
      config: {path: "$WORK/w2.sink", delay_ms: "0"}
YAML
printf '{"id":"w-1"}\n' | "$KT" produce -t "$TW"
rc=0
"$DEDUPD" -c "$WORK/w2.yaml" >"$WORK/w2.log" 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupd exit code with workers: 2 and a handler not declared concurrent"
grep -q "workers: 2: topic $TW: handler .*filesink.so does not declare DEDUPD_HANDLER_F_CONCURRENT.*workers must be 1" "$WORK/w2.log" ||
        fail "the refusal does not say why: $(cat "$WORK/w2.log")"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE topic = '$TW'")" 0 "keys a refused dedupd claimed"
[[ ! -s $WORK/w2.sink ]] || fail "a refused dedupd wrote effects: $(cat "$WORK/w2.sink")"
log "ok: workers: 2 with a handler not declared concurrent is refused at start"
