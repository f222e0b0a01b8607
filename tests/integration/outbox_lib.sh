# Helpers for the tests of outbox rows that cannot be published, sourced after
# lib.sh: the settings they run with, the metrics endpoint, the rows' state.

# outbox_settings: the outbox, purge and http sections (a row is given up
# after MAX_FAILURES, default 3, within a second or two; sent rows are purged
# OUTBOX_KEEP after they were sent)
outbox_settings() {
        cat <<EOF
outbox:
  interval_ms: 200
  max_failures: ${MAX_FAILURES:-3}
  retry_backoff_ms: 100
  retry_backoff_max_ms: 400
  publish_timeout_ms: 2000
  keep: ${OUTBOX_KEEP:-7d}
purge:
  interval_ms: 500
http:
  listen: "127.0.0.1:0"
  gauges_interval_ms: 1000
EOF
}

# metrics_of NAME: ADDR set to where dedupd NAME serves /metrics (read from its log)
metrics_of() {
        ADDR=
        for ((i = 0; i < 100; i++)); do
                ADDR=$(sed -n 's#.*serving /metrics, /healthz and /readyz on http://\([0-9.:]*\).*#\1#p' "$WORK/$1.log" | tail -n 1)
                [[ -n $ADDR ]] && return 0
                sleep 0.1
        done
        fail "dedupd $1 did not say where it serves /metrics: $(tail -5 "$WORK/$1.log")"
}

# metric NAME: the value of an unlabelled series at $ADDR
metric() { curl -s "http://$ADDR/metrics" | awk -v m="$1" '$1==m{print $2}'; }

# metric_is NAME VALUE: the series has that value now
metric_is() { [[ $(metric "$1") == "$2" ]]; }

# assert_metric NAME VALUE: the series reaches that value (a counter moves
# just after the COMMIT a test sees, a gauge when the gauges are read next)
assert_metric() {
        for ((m = 0; m < 100; m++)); do
                metric_is "$1" "$2" && break
                sleep 0.1
        done
        assert_eq "$(metric "$1")" "$2" "$1"
}

# wait_until SECONDS WHAT CMD...: until CMD succeeds, or fail naming WHAT
wait_until() {
        local secs=$1 what=$2
        shift 2
        for ((w = 0; w < secs * 10; w++)); do
                "$@" && return 0
                sleep 0.1
        done
        fail "timed out after ${secs}s waiting for $what"
}

# given_up: how many outbox rows are given up
given_up() { sql "SELECT count(*) FROM dedupd.outbox WHERE given_up_at IS NOT NULL"; }
# waiting: how many are neither sent nor given up
waiting() { sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL AND given_up_at IS NULL"; }
# settled N: no row waits, and N are given up
settled() { [[ $(waiting) == 0 && $(given_up) == "$1" ]]; }
# row_to TOPIC: the id of the outbox row to TOPIC
row_to() { sql "SELECT id FROM dedupd.outbox WHERE topic = '$1'"; }
# row_state ID: "failures|given up (t/f)|reason" of a row
row_state() { sql "SELECT failures || '|' || CASE WHEN given_up_at IS NULL THEN 'f' ELSE 't' END || '|' || coalesce(last_error, '') FROM dedupd.outbox WHERE id = $1"; }
# sent ID: the row is marked sent
sent() { [[ $(sql "SELECT sent_at IS NOT NULL FROM dedupd.outbox WHERE id = $1") == t ]]; }
# is_given_up ID: the row is given up
is_given_up() { [[ $(sql "SELECT given_up_at IS NOT NULL FROM dedupd.outbox WHERE id = $1") == t ]]; }

# assert_given_up ID REASON_REGEX: given up after MAX_FAILURES with its
# reason kept, and dedupctl outbox list shows it so
assert_given_up() {
        local id=$1 re=$2 state
        state=$(row_state "$id")
        assert_eq "${state%%|*}" "${MAX_FAILURES:-3}" "row $id: failures counted before it was given up"
        [[ $state == *"|t|"* ]] || fail "row $id is not given up: $state"
        grep -Eq "$re" <<<"${state#*|t|}" || fail "row $id's reason '${state#*|t|}' does not match /$re/"
        log "ok: row $id given up: ${state#*|t|}"
        "$DEDUPCTL" outbox list -c "$WORK/c.yaml" >"$WORK/list.out" || fail "dedupctl outbox list exited $?"
        cat "$WORK/list.out"
        grep -Eq "^ *$id *\|given up *\|" "$WORK/list.out" || fail "dedupctl outbox list does not show row $id given up"
        grep -Eq "$re" "$WORK/list.out" || fail "dedupctl outbox list does not show row $id's reason"
}

# retry_until_sent ID: dedupctl outbox retry until the relay publishes the row
# (a destination made a moment ago may still be unknown to the client once)
retry_until_sent() {
        local id=$1
        for ((r = 0; r < 10; r++)); do
                "$DEDUPCTL" outbox retry -c "$WORK/c.yaml" "$id" >"$WORK/retry.out" || fail "dedupctl outbox retry $id exited $?"
                grep -q "^row $id: put back" "$WORK/retry.out" || fail "dedupctl outbox retry: $(cat "$WORK/retry.out")"
                wait_until 30 "row $id sent or given up again" eval "sent $id || is_given_up $id"
                sent "$id" && { log "ok: row $id published after dedupctl outbox retry"; return 0; }
        done
        fail "row $id not published after 10 retries: $(row_state "$id")"
}

# assert_no_pause NAME: no topic of dedupd NAME paused fetching
assert_no_pause() {
        assert_eq "$(grep -c 'paused fetching' "$WORK/$1.log" || true)" 0 "pauses of fetching in $1's log"
}

# ---- the identity a message goes out with (dedupd.outbox.msg_id) -----------

# derived_id NS KEY PLACE...: the id a downstream can compute itself — hex
# SHA-256 of "dedupd.outbox.v1", NS, KEY and the place's fields ("reply";
# "emit" N; "reply" TOPIC PARTITION OFFSET for a duplicate's), each ended by a NUL
derived_id() {
        local f
        for f in dedupd.outbox.v1 "$@"; do printf '%s\0' "$f"; done | sha256sum | cut -c1-64
}

# lose_commits NS [UNDO_SQL] [POSITION]: what a failover to a replica that
# had none of NS's commits loses, in one transaction: its keys, its outbox
# rows, its positions (back to POSITION, default 0: a NATS stream starts at
# 1) and the handler's effects (UNDO_SQL)
lose_commits() {
        sql "DELETE FROM dedupd.keys WHERE namespace = '$1'; DELETE FROM dedupd.outbox WHERE namespace = '$1';
             UPDATE dedupd.offsets SET next_offset = ${3:-0} WHERE namespace = '$1'; ${2:-}"
}

# nats_msg_ids DUMP: each message of a natstool dump as "NATS-MSG-ID OUTBOX-ID"
# (its Nats-Msg-Id header and its dedupd.outbox.id, - where missing)
nats_msg_ids() {
        awk -F'\t' '{n = "-"; o = "-"; c = split($2, h, ";")
                      for (i = 1; i <= c; i++) {
                              if (h[i] ~ /^Nats-Msg-Id=/) n = substr(h[i], 13)
                              if (h[i] ~ /^dedupd\.outbox\.id=/) o = substr(h[i], 18)
                      }
                      print n, o}' "$1"
}

# kafka_outbox_ids DUMP: each record of a kafkatool dump as "KEY EMIT ID" —
# its key, its emit-no header (- if none), its dedupd.outbox.id — sorted
kafka_outbox_ids() {
        awk '/^[0-9]+ /{if (k != "") print k, e, id; k = $3; e = "-"; id = "-"; next}
             /^  emit-no=/{e = substr($0, 11)}
             /^  dedupd.outbox.id=/{id = substr($0, 20)}
             END{if (k != "") print k, e, id}' "$1" | sort
}

# assert_same_ids BEFORE AFTER WHAT: AFTER (kafka_outbox_ids of the topic
# once its messages applied twice) holds each line of BEFORE exactly twice:
# every message went out again with the identity it had
assert_same_ids() {
        local n
        n=$(wc -l <<<"$1")
        assert_eq "$(uniq <<<"$2")" "$1" "$3: the messages and their ids after the re-apply"
        assert_eq "$(uniq -c <<<"$2" | awk '$1 != 2' | wc -l)" 0 "$3: messages not sent exactly twice with one id"
        assert_eq "$(awk '{print $3}' <<<"$1" | sort -u | wc -l)" "$n" "$3: distinct ids"
}
