# The conformance suite's Kafka adapter: the b_* steps (tests/conformance/lib.sh
# lists them) on the integration tests' Kafka helpers (tests/integration/lib.sh).
BROKER_LABEL="Kafka"
# A record with no value (a tombstone) is an empty message: its own reason.
B_EMPTY_REASON="payload is empty"
# After a kill between COMMIT and the offset commit, a restart resumes from
# dedupd.offsets: nothing committed is delivered again.
B_REDELIVERS_COMMITTED=no
# What the log says when a restart resumes from dedupd.offsets.
B_RESUME_LINE="assigned [^ ]+/[0-9]+: starting at offset [0-9]+ \\(database\\)"
# What dedupctl replay says when it refuses to move a group with live members.
B_REPLAY_REFUSED="group grp-.* has active members.*stop the dedupd instances first"
# How long the broker takes to hand a killed instance's messages to a new one (the group waits out its session).
B_RESTART_S=8
# Bytes the test's publisher adds to a line's body.
B_BODY_EXTRA=0

# b_setup NAME PARTITIONS: the topic and its dead-letter topic; NAME_B is what dedupd consumes
b_setup() {
        NAME_B="$1_$$"
        topic "$NAME_B" "$2"
}

# b_config FILE [EXTRA_TOPIC_YAML]: the transfer handler on NAME_B, dead letters to NAME_B.dlq
b_config() { write_config "$1" "$NAME_B" "${2:-}"; }

# b_produce [NAME:VALUE]... < lines: each line one record (no key: spread over the partitions)
b_produce() {
        local h args=()
        for h in "$@"; do args+=(-H "${h%%:*}=${h#*:}"); done
        # an empty line is an empty value (kafkatool's \N: a record without a value)
        sed 's/^$/\\N/' | "$KT" produce -t "$NAME_B" "${args[@]}"
}

# b_count: records in the topic
b_count() { produced "$NAME_B"; }

# b_committed: records the database has committed past (its position, all partitions)
b_committed() { progressed "$NAME_B"; }

# b_acked: records the broker holds as acknowledged (the group's committed offsets)
b_acked() { "$KT" offsets -t "$NAME_B" -g "grp-$ID" | awk '$1!="total" && $4 > 0 {s += $4} END {print s + 0}'; }

# b_wait_done [SECONDS]: until the database has committed past every record
b_wait_done() { wait_done "$NAME_B" "${1:-120}"; }

# b_done: every message committed (no waiting, no failing: a predicate)
b_done() { is_progressed "$NAME_B" "$(produced "$NAME_B")"; }

# b_check_acked: everything acknowledged, as the broker sees it
b_check_acked() {
        local lag
        for ((i = 0; i < 100; i++)); do lag=$(kafka_lag "$NAME_B"); [[ $lag == 0 ]] && break; sleep 0.1; done
        assert_eq "$lag" 0 "Kafka consumer lag"
}

# b_check_started LOG: the log says what dedupd consumes
b_check_started() { grep -q "assigned $NAME_B/" "$WORK/$1.log" || fail "dedupd $1 never said it was assigned $NAME_B"; }

# b_dead_letters OUT: each dead letter one line, "HEADERS<TAB>BODY", HEADERS "name=value;..."
b_dead_letters() {
        "$KT" dump -t "$NAME_B.dlq" | awk '
                /^[0-9]/ { if (n++) print h "\t" b; h = ""; b = $0; sub(/^[0-9]+ [0-9]+ [^ ]* /, "", b); next }
                /^  / { sub(/^  /, ""); h = h (h == "" ? "" : ";") $0 }
                END { if (n) print h "\t" b }' >"$1"
}

# b_out NAME: a destination for replies and emitted messages (a topic), its name printed
b_out() {
        "$KT" create -t "$1_$$" -p 1 >/dev/null
        echo "$1_$$"
}

# b_out_read DEST OUT: what DEST holds, as b_dead_letters prints it (the record's key as header key=)
b_out_read() {
        "$KT" dump -t "$1" | awk '
                /^[0-9]/ { if (n++) print h "\t" b; b = $0; sub(/^[0-9]+ [0-9]+ [^ ]* /, "", b); h = "key=" $3; next }
                /^  / { sub(/^  /, ""); h = h ";" $0 }
                END { if (n) print h "\t" b }' >"$2"
}

# b_out_count DEST: messages in DEST
b_out_count() { produced "$1"; }

# b_place N: the place (topic, partition, offset) of the Nth message of a one-partition topic
b_place() { echo "$NAME_B 0 $(($1 - 1))"; }

# b_origin N: the headers (an extended regex) naming the Nth message of a one-partition topic or a queue
b_origin() { echo "(^|;)dedupd\.origin\.topic=$NAME_B;(.*;)?dedupd\.origin\.offset=$(($1 - 1))[;$TAB]"; }


# b_broker_stop term|kill, b_broker_start: the broker everyone shares
b_broker_stop() { "$DEDUPD_SERVICES" kafka-stop "$1"; }
b_broker_start() { "$DEDUPD_SERVICES" kafka-start; }

# b_check_reconnected LOG: the log says the broker went away (librdkafka reconnects by
# itself and logs no line for it: the progress after each restart, which broker_restart
# waits for, is what shows it came back)
b_check_reconnected() {
        grep -q "\[kafka\] _TRANSPORT: .*Disconnected" "$WORK/$1.log" || fail "dedupd $1 did not say it lost the broker"
        log "ok: the log says the broker went away"
}

# b_tls_setup NAME: the topic (as b_setup), consumed over the broker's SASL_SSL
# listener (scripts/services' test CA, a SCRAM user); TLS_CA the CA that signed
# the broker's certificate, TLS_SECRET the password b_tls_config writes
b_tls_setup() {
        [[ -n ${KAFKA_SASL_SSL_BOOTSTRAP:-} && -f ${DEDUPD_TLS_DIR:-}/ca.crt ]] ||
                fail "the broker has no SASL_SSL listener: run scripts/services down, then scripts/services up"
        b_setup "$1" 2
        TLS_CA=$DEDUPD_TLS_DIR/ca.crt TLS_SECRET=$KAFKA_SCRAM_PASSWORD
}

# b_tls_config FILE CA: b_config's, over SASL_SSL (SCRAM-SHA-512), the broker's certificate checked against CA
b_tls_config() {
        b_config "$1"
        sed -i "s#^  bootstrap.servers: .*#  bootstrap.servers: \"$KAFKA_SASL_SSL_BOOTSTRAP\"\n  security.protocol: SASL_SSL\n  ssl.ca.location: \"$2\"\n  sasl.mechanisms: SCRAM-SHA-512\n  sasl.username: \"$KAFKA_SCRAM_USER\"\n  sasl.password: \"$KAFKA_SCRAM_PASSWORD\"#" "$1"
}

# What dedupd's ERROR says when the broker's certificate is not signed by the configured CA.
B_TLS_REFUSED="the TLS handshake with the Kafka broker\\(s\\) at [0-9.:]+ \\(bootstrap.servers\\) failed \\(check ssl.ca.location.*certificate verify failed"
