# RabbitMQ helpers for the integration tests, sourced after lib.sh: queues,
# a publisher (amqp-publish from amqp-tools), what the broker holds, a config.
[[ -n ${RABBITMQ_URL:-} ]] || fail "no RABBITMQ_URL in .run/env: run scripts/services up (with DEDUPD_RABBITMQ unset or 1)"

rmqctl() { "$DEDUPD_SERVICES" rabbitmqctl "$@"; }

# rmq_define JSON: queues, exchanges and bindings as rabbitmqctl import_definitions takes them
rmq_define() {
        printf '%s\n' "$1" >"$WORK/defs.json"
        rmqctl import_definitions "$WORK/defs.json" >/dev/null
}

# rmq_queue NAME [ARGUMENTS_JSON]: a durable queue
rmq_queue() {
        rmq_define "{\"queues\":[{\"name\":\"$1\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":${2:-{\}}}]}"
}

# rmq_publish QUEUE [amqp-publish options]: each line of stdin one persistent message, through the default exchange
rmq_publish() {
        local q=$1
        shift
        amqp-publish --url="$RABBITMQ_URL" -r "$q" -p -l "$@"
}

# rmq_close_connections NAMESPACE: the broker closes the connections the
# dedupd instances of NAMESPACE hold (each names its connection "dedupd
# NAMESPACE"), and no other test's; CLOSED is how many it closed
rmq_close_connections() {
        local pid
        CLOSED=0
        while read -r pid; do
                rmqctl close_connection "$pid" "test: closed by the broker" >/dev/null
                CLOSED=$((CLOSED + 1))
        done < <(rmqctl list_connections --no-table-headers pid client_properties |
                awk -F'\t' -v c="{\"connection_name\",\"dedupd $1\"}" 'index($2, c) {print $1}')
}

# rmq_messages QUEUE: ready plus unacknowledged messages in the queue
rmq_messages() { rmqctl list_queues name messages | awk -v q="$1" '$1==q{print $2}'; }

# rmq_wait_empty QUEUE [SECONDS]: until every message of the queue is acknowledged
rmq_wait_empty() {
        poll "${2:-120}" rmq_empty "$1" || fail "timed out: queue $1 still holds $HELD message(s)"
}
# rmq_empty QUEUE: nothing ready or unacknowledged in it (HELD: how many are)
rmq_empty() {
        HELD=$(rmq_messages "$1")
        [[ $HELD == 0 ]]
}

# rmq_get QUEUE: one message's body (amqp-get), "" when the queue is empty
rmq_get() { amqp-get --url="$RABBITMQ_URL" -q "$1" 2>/dev/null || true; }

# rmq_config_head: a test config's head with its rabbitmq: section (PREFETCH: 500, HEARTBEAT: 5)
rmq_config_head() {
        cat <<YAML
$(config_head)
source: rabbitmq
rabbitmq:
  url: "\${RMQ_TEST_URL}"
  prefetch: ${PREFETCH:-500}
  heartbeat_s: ${HEARTBEAT:-5}
  reconnect_max_ms: 500
YAML
}

# rmq_write_config FILE QUEUE [EXTRA_TOPIC_YAML] [EXTRA_RABBITMQ_YAML]: a config for the transfer handler
rmq_write_config() {
        local file=$1 q=$2 extra=${3:-} rextra=${4:-}
        cat >"$file" <<YAML
$(rmq_config_head)
$rextra
topics:
$(transfer_topic "$q")
$extra
YAML
}
export RMQ_TEST_URL=$RABBITMQ_URL

AT="$BUILD/tests/amqptool"
# rmq_dead_letters QUEUE OUT: every message left in QUEUE, each as amqptool prints it, blank-line separated
rmq_dead_letters() {
        : >"$2"
        while RABBITMQ_URL=$RABBITMQ_URL "$AT" get "$1" >>"$2"; do echo >>"$2"; done
}

# rmq_loaded_queue QUEUE MSGS ORDERS: the queue, its config ($WORK/c.yaml) and a
# workload of MSGS messages for ORDERS orders ($WORK/w.txt, its keys in
# $WORK/keys.txt) published to it and counted there
rmq_loaded_queue() {
        rmq_queue "$1"
        rmq_write_config "$WORK/c.yaml" "$1"
        workload "$WORK/w.txt" "$WORK/keys.txt" "$2" "$3"
        rmq_publish "$1" <"$WORK/w.txt"
        assert_eq "$(rmq_messages "$1")" "$2" "messages in the queue"
}

# keys: the keys the database holds (0 while it cannot say)
keys() { sql "SELECT count(*) FROM dedupd.keys" 2>/dev/null || echo 0; }
