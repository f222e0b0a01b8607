# The conformance suite's RabbitMQ adapter: the b_* steps (tests/conformance/lib.sh
# lists them) on the integration tests' RabbitMQ helpers (tests/integration/rmq_lib.sh).
. "$ROOT/tests/integration/rmq_lib.sh"
BROKER_LABEL="RabbitMQ"
# An empty body reaches the key as a JSON parse error.
B_EMPTY_REASON="payload is not valid JSON"
# The broker redelivers every delivery not acked: a batch committed but
# never acked comes back, and only the dedup table absorbs it.
B_REDELIVERS_COMMITTED=yes
# RabbitMQ has no position to resume from (the broker redelivers): no line.
B_RESUME_LINE=""
# How long the broker takes to hand a killed instance's messages to a new one (none: it requeues them as the connection drops).
B_RESTART_S=0
# Bytes the test's publisher adds to a line's body (amqp-publish -l keeps its newline).
B_BODY_EXTRA=1
# dedupctl replay refuses RabbitMQ whatever runs (the matrix: replay n/a).
B_REPLAY_REFUSED=""

# b_setup NAME PARTITIONS: the queue, a dead-letter exchange and the queue its letters land in
# (a queue is one partition: PARTITIONS does not apply)
b_setup() {
        NAME_B="$1_$$"
        rmq_define "{\"queues\":[{\"name\":\"$NAME_B\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}},
  {\"name\":\"$NAME_B.letters\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}}],
 \"exchanges\":[{\"name\":\"dlx_$NAME_B\",\"vhost\":\"/\",\"type\":\"direct\",\"durable\":true,\"auto_delete\":false,\"internal\":false,\"arguments\":{}}],
 \"bindings\":[{\"source\":\"dlx_$NAME_B\",\"vhost\":\"/\",\"destination\":\"$NAME_B.letters\",\"destination_type\":\"queue\",\"routing_key\":\"$NAME_B.dlq\",\"arguments\":{}}]}"
}

# b_config FILE [EXTRA_TOPIC_YAML]: the transfer handler on the queue, dead letters to its exchange
b_config() { rmq_write_config "$1" "$NAME_B" "${2:-}" "  dead_letter:
    exchange: dlx_$NAME_B"; }

# b_produce [NAME:VALUE]... < lines: each line one persistent message
b_produce() {
        local h args=()
        local lines
        for h in "$@"; do args+=(-H "${h%%:*}: ${h#*:}"); done
        lines=$(mktemp -p "$WORK" published.XXXXXX)
        cat >"$lines"
        rmq_publish "$NAME_B" "${args[@]}" <"$lines"
        wc -l <"$lines" >>"$WORK/published"
}

# b_count: messages published (the broker keeps no count of what was acked: $WORK/published does)
b_count() { awk '{s += $1} END {print s + 0}' "$WORK/published" 2>/dev/null || echo 0; }

# b_committed: deliveries the database has committed (RabbitMQ has no offsets: dedupd counts them)
b_committed() { progressed "$NAME_B"; }

# b_acked: deliveries the broker holds as acknowledged (published, no longer in the queue)
b_acked() { echo $(($(b_count) - $(rmq_messages "$NAME_B"))); }

# b_wait_done [SECONDS]: until every message of the queue is acknowledged
b_wait_done() { rmq_wait_empty "$NAME_B" "${1:-120}"; }

# b_done: nothing left in the queue, ready or unacknowledged (a predicate)
b_done() { rmq_empty "$NAME_B"; }

# b_check_acked: everything acknowledged, as the broker sees it
b_check_acked() { assert_eq "$(rmq_messages "$NAME_B")" 0 "messages left in the queue"; }

# b_check_started LOG: the log names the broker, never the URL's password
b_check_started() {
        # the URL dedupd was given (amqp:// or b_tls_setup's amqps://), without its user:password
        grep -qF "connected to $(sed -E 's#//[^@]*@#//#' <<<"$RMQ_TEST_URL") vhost /: consuming 1 queue(s), prefetch ${PREFETCH:-500}" "$WORK/$1.log" || fail "no connection line in the log"
        if grep -qF -e "guest:guest" -e "$RMQ_TEST_URL" "$WORK/$1.log"; then fail "the URL (with its password) is in the log"; fi
        log "ok: the log names the broker, never the URL's password"
}

# b_dead_letters OUT: each dead letter one line, "HEADERS<TAB>BODY", HEADERS "name=value;..."
b_dead_letters() {
        rmq_dead_letters "$NAME_B.letters" "$WORK/letters.raw"
        awk '/^header / { sub(/^header /, ""); h = h (h == "" ? "" : ";") $0; next }
             /^body / { sub(/^body /, ""); print h "\t" $0; h = ""; next }
             /^body$/ { print h "\t"; h = "" }' "$WORK/letters.raw" >"$1"
}

# b_out NAME: a destination for replies and emitted messages (a fanout exchange, read
# back from the queue bound to it), its name printed
b_out() {
        rmq_define "{\"queues\":[{\"name\":\"$1_$$.q\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}}],
 \"exchanges\":[{\"name\":\"$1_$$\",\"vhost\":\"/\",\"type\":\"fanout\",\"durable\":true,\"auto_delete\":false,\"internal\":false,\"arguments\":{}}],
 \"bindings\":[{\"source\":\"$1_$$\",\"vhost\":\"/\",\"destination\":\"$1_$$.q\",\"destination_type\":\"queue\",\"routing_key\":\"\",\"arguments\":{}}]}"
        echo "$1_$$"
}

# b_out_read DEST OUT: what DEST's queue holds (taking it), as b_dead_letters prints it
# (the AMQP message_id as header broker.id=)
b_out_read() {
        rmq_dead_letters "$1.q" "$WORK/out.raw"
        awk '/^message_id / { h = h (h == "" ? "" : ";") "broker.id=" $2; next }
             /^header / { sub(/^header /, ""); h = h (h == "" ? "" : ";") $0; next }
             /^body / { sub(/^body /, ""); print h "\t" $0; h = ""; next }
             /^body$/ { print h "\t"; h = "" }' "$WORK/out.raw" >"$2"
}

# b_out_count DEST: messages in DEST's queue
b_out_count() { rmq_messages "$1.q"; }

# b_place N: the place (queue, partition 0, delivery number) of the Nth message of the queue
b_place() { echo "$NAME_B 0 $(($1 - 1))"; }

# b_origin N: the headers (an extended regex) naming the Nth message of a one-partition topic or a queue
b_origin() { echo "(^|;)dedupd\.origin\.topic=$NAME_B;(.*;)?dedupd\.origin\.offset=$(($1 - 1))[;$TAB]"; }


b_broker_stop() { "$DEDUPD_SERVICES" rabbitmq-stop "$1"; }
b_broker_start() { "$DEDUPD_SERVICES" rabbitmq-start; }

# b_check_reconnected LOG: the log says the connection was lost and came back
b_check_reconnected() {
        grep -q "\[rabbitmq\] connection to amqp://127.0.0.1:.* lost: " "$WORK/$1.log" || fail "no 'connection lost' line"
        grep -q "\[rabbitmq\] reconnected to amqp://127.0.0.1:" "$WORK/$1.log" || fail "no 'reconnected' line"
        log "ok: the log says the connection was lost and came back"
}

# b_tls_setup NAME: the queue (as b_setup), consumed over amqps:// (RABBITMQ_TLS_URL,
# scripts/services' test CA); TLS_CA the CA that signed the broker's certificate,
# TLS_SECRET the URL's user:password (dedupd reads the URL from the environment)
b_tls_setup() {
        [[ -n ${RABBITMQ_TLS_URL:-} ]] || fail "no RABBITMQ_TLS_URL in .run/env: run scripts/services up again"
        b_setup "$1" 1
        export RMQ_TEST_URL=$RABBITMQ_TLS_URL
        TLS_CA=$RABBITMQ_CA_FILE TLS_SECRET=$(sed -E 's#^amqps://([^@]*)@.*#\1#' <<<"$RABBITMQ_TLS_URL")
}

# b_tls_config FILE CA: b_config's, the broker's certificate (and host name) checked against CA
b_tls_config() {
        b_config "$1"
        sed -i "s#^rabbitmq:\$#rabbitmq:\n  ca_file: \"$2\"#" "$1"
}

# What dedupd's ERROR says when the broker's certificate is not signed by the configured CA.
B_TLS_REFUSED="waiting for RabbitMQ: amqps://localhost:[0-9]+ vhost /: SSL peer cert verification failed"
