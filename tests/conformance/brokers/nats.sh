# The conformance suite's NATS JetStream adapter: the b_* steps (tests/conformance/lib.sh
# lists them) on the integration tests' NATS helpers (tests/integration/nats_lib.sh).
. "$ROOT/tests/integration/nats_lib.sh"
BROKER_LABEL="NATS JetStream"
# An empty message has no JSON to read a key from.
B_EMPTY_REASON="payload is empty"
# A restart puts the consumer back at its acknowledged floor: a batch
# committed but never acked is delivered again, and absorbed.
B_REDELIVERS_COMMITTED=yes
# What the log says when a restart finds deliveries in flight and puts the consumer back.
B_RESUME_LINE="creating it again at stream sequence"
# What dedupctl replay says when it refuses to move a consumer a dedupd pulls from.
B_REPLAY_REFUSED="pull request\\(s\\) waiting: a dedupd is consuming it; stop it first"
# How long the broker takes to hand a killed instance's messages to a new one (none: the consumer is put back at once).
B_RESTART_S=0
# Bytes the test's publisher adds to a line's body.
B_BODY_EXTRA=0

# b_setup NAME PARTITIONS: the stream (the subject, its dead letters, b_out's subjects); NAME_B is the subject
# (a subject is one partition: PARTITIONS does not apply)
b_setup() {
        NAME_B=$SUBJ
        "$NT" stream "$STREAM" "$SUBJ" "$DLQ_SUBJ" "out.$ID.>"
}

# b_config FILE [EXTRA_TOPIC_YAML]: the transfer handler on the subject, dead letters to DLQ_SUBJ
b_config() { write_nats_config "$1" "  dead_letter: {subject: $DLQ_SUBJ}" "${2:-}"; }

# b_produce [NAME:VALUE]... < lines: each line one message on the subject
b_produce() { publish "$@" 2>/dev/null; }

# b_count: messages in the subject
b_count() { last_seq; }

# b_committed: messages the database has committed past (its position is the next sequence)
b_committed() { local p; p=$(progressed "$NAME_B"); echo $((p > 0 ? p - 1 : 0)); }

# b_acked: the consumer's acknowledged floor
b_acked() { consumer_field ack_floor; }

# b_wait_done [SECONDS]: until the database is past the last message and nothing is unacknowledged
b_wait_done() { nats_done "${1:-120}"; }

# b_done: the database past the last message, nothing unacknowledged (a predicate)
b_done() { nats_settled $(($(last_seq) + 1)); }

# b_check_acked: everything acknowledged, as the server sees it
b_check_acked() {
        # (the floor is a stream sequence: the stream holds the dead letters too)
        (($(consumer_field ack_floor) >= $(last_seq))) || fail "the consumer's acknowledged floor $(consumer_field ack_floor) is below the subject's last message $(last_seq)"
        log "ok: the consumer's acknowledged floor is past the subject's last message"
        assert_eq "$(consumer_field ack_pending)" 0 "messages left unacknowledged"
        assert_eq "$(consumer_field pending)" 0 "messages not yet delivered"
}

# b_check_started LOG: the log says what dedupd consumes
b_check_started() { grep -q "consuming 1 subject(s) of stream $STREAM" "$WORK/$1.log" || fail "dedupd $1 did not say what it consumes"; }

# b_dead_letters OUT: each dead letter one line, "HEADERS<TAB>BODY", HEADERS "name=value;..."
b_dead_letters() { "$NT" dump "$STREAM" "$DLQ_SUBJ" | cut -f 2- >"$1"; }

# b_out NAME: a destination for replies and emitted messages (a subject of the test's stream), its name printed
b_out() { echo "out.$ID.$1"; }

# b_out_read DEST OUT: what DEST holds, as b_dead_letters prints it (Nats-Msg-Id also as header broker.id=)
b_out_read() {
        "$NT" dump "$STREAM" "$1" | cut -f 2- |
                awk -F'\t' -v OFS='\t' '{ if (match($1, /(^|;)Nats-Msg-Id=[^;]*/)) { id = substr($1, RSTART, RLENGTH); sub(/^;/, "", id); sub(/^Nats-Msg-Id=/, "", id); $1 = $1 ";broker.id=" id } print }' >"$2"
}

# b_out_count DEST: messages in DEST
b_out_count() { "$NT" dump "$STREAM" "$1" | wc -l; }

# b_place N: the place (subject, partition 0, stream sequence) of the subject's Nth message
b_place() { echo "$NAME_B 0 $("$NT" dump "$STREAM" "$SUBJ" | sed -n "$1p" | cut -f 1)"; }

# b_origin N: the headers (an extended regex) naming the Nth message published (its stream sequence)
b_origin() { echo "(^|;)dedupd\.origin\.sequence=$1[;$TAB]"; }


b_broker_stop() { "$DEDUPD_SERVICES" nats-stop "$1"; }
b_broker_start() { "$DEDUPD_SERVICES" nats-start; }

# b_check_reconnected LOG: the log says the server went away and came back
b_check_reconnected() {
        grep -q "disconnected from nats://127.0.0.1" "$WORK/$1.log" || fail "dedupd $1 did not say it lost the server"
        grep -q "reconnected to nats://127.0.0.1" "$WORK/$1.log" || fail "dedupd $1 did not say it reconnected"
        log "ok: the log says the server went away and came back"
}

# b_tls_setup NAME: the stream (as b_setup) on a nats-server of the test's own
# that requires TLS (scripts/services' test CA and server certificate) and a
# user with a password in nats.url; TLS_CA the CA that signed the server's
# certificate, TLS_SECRET that password
b_tls_setup() {
        [[ -f ${DEDUPD_TLS_DIR:-}/server.crt ]] || fail "no test certificates in .run/tls: run scripts/services up"
        local port
        port=$(free_port)
        TLS_CA=$DEDUPD_TLS_DIR/ca.crt TLS_SECRET="Pw$$-$RANDOM-hidden"
        nats_server "tls_$1" "$port" "tls { cert_file: \"$DEDUPD_TLS_DIR/server.crt\", key_file: \"$DEDUPD_TLS_DIR/server.key\" }
authorization { users: [ { user: dedupd, password: \"$TLS_SECRET\" } ] }"
        export NATS_URL="nats://dedupd:$TLS_SECRET@127.0.0.1:$port" NATS_TLS_CA=$TLS_CA
        b_setup "$1" 1
}

# b_tls_config FILE CA: b_config's, the server's certificate checked against CA (nats.tls_ca)
b_tls_config() {
        b_config "$1"
        sed -i "s#^nats:\$#nats:\\n  tls_ca: \"$2\"#" "$1"
}

# What dedupd's ERROR says when the server's certificate is not signed by the configured CA.
B_TLS_REFUSED="cannot connect to NATS at nats://127.0.0.1:[0-9]+: SSL Error: .*SSL handshake error: .*unable to get local issuer certificate"
