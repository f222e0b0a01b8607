# Helpers for the NATS JetStream tests, sourced after lib.sh: the real
# nats-server that scripts/services started ($NATS_URL), each test with its
# own stream, subjects and durable consumer.
NT="$BUILD/tests/natstool"
[[ -n ${NATS_URL:-} ]] || fail "no NATS_URL in .run/env: run scripts/services up"
STREAM="S_$ID"
SUBJ="pay.$ID"
DLQ_SUBJ="dead.$ID"
DURABLE="d-$ID"
# The consumer dedupd makes of SUBJ: <durable>-<subject>, . * > as _.
CONSUMER="${DURABLE}-${SUBJ//./_}"

# nats_stream: the test's stream, holding its subject and its dead letters
nats_stream() { "$NT" stream "$STREAM" "$SUBJ" "$DLQ_SUBJ"; }

# publish [NAME:VALUE]...: every stdin line a message on SUBJ
publish() { "$NT" pub "$SUBJ" "$@"; }

# write_nats_config FILE [EXTRA_TOP_LEVEL_NATS_YAML] [EXTRA_TOPIC_YAML]: the transfer handler on SUBJ
write_nats_config() {
        local file=$1 nats_extra=${2:-} extra=${3:-} key='{json:order_id}'
        [[ -z ${KEY_SUBJECT:-} ]] || key=$KEY_SUBJECT
        cat >"$file" <<EOF2
$(config_head)
source: nats
nats:
  url: "$NATS_URL"
  stream: $STREAM
  durable: $DURABLE
  ack_wait_ms: ${ACK_WAIT_MS:-2000}
$nats_extra
topics:
$(transfer_topic "$SUBJ" "$key")
$extra
EOF2
}

# last_seq: the stream sequence of the subject's last message
last_seq() { "$NT" lastseq "$STREAM" "$SUBJ"; }

# nats_done [SECONDS]: until the database's position is past the subject's
# last message and the consumer holds nothing unacknowledged (a delivery lost
# in a reconnect comes back after ack_wait, below that position)
nats_done() {
        local want
        INFLIGHT=?
        want=$(($(last_seq) + 1))
        poll "${1:-120}" nats_settled "$want" ||
                fail "timed out: the database is at $GOT, the subject's next sequence is $want, $INFLIGHT unacknowledged"
}
# nats_settled WANT: the database's position is WANT and the consumer holds nothing (INFLIGHT: its ack_pending)
nats_settled() {
        is_progressed "$SUBJ" "$1" || return 1
        INFLIGHT=$(consumer_field ack_pending)
        [[ $INFLIGHT == 0 && $(consumer_field pending) == 0 ]]
}

# consumer_field NAME: ack_floor, delivered, pending, ack_pending or waiting of dedupd's consumer
consumer_field() { "$NT" consumer "$STREAM" "$CONSUMER" | awk -v k="$1" '$1==k{print $2}'; }

# nats_server NAME PORT EXTRA_CONF: a nats-server of the test's own on
# 127.0.0.1:PORT (EXTRA_CONF: more of its config, e.g. tls {...}), JetStream in
# $WORK/NAME.store, until its client port answers with INFO; killed when the test ends
NS_PIDS=()
nats_server() {
        local name=$1 port=$2 line=""
        cat >"$WORK/$name.conf" <<EOF
listen: 127.0.0.1:$port
server_name: $name-$$
jetstream { store_dir: "$WORK/$name.store" }
$3
EOF
        ((${#NS_PIDS[@]})) || on_exit nats_stop_servers
        /usr/sbin/nats-server -c "$WORK/$name.conf" >>"$WORK/$name.server.log" 2>&1 &
        NS_PIDS+=($!)
        for ((i = 0; i < 100; i++)); do
                if exec 7<>"/dev/tcp/127.0.0.1/$port"; then
                        read -r -t 2 line <&7 || line=""
                        exec 7>&-
                        [[ $line == INFO* && $line == *'"jetstream":true'* ]] && return 0
                fi 2>/dev/null
                sleep 0.1
        done
        fail "nats-server $name did not answer on 127.0.0.1:$port: $(tail -n 5 "$WORK/$name.server.log")"
}

# nats_stop_servers: kill the servers nats_server started (an on_exit hook)
nats_stop_servers() {
        local p
        for p in "${NS_PIDS[@]}"; do { kill "$p" && wait "$p"; } 2>/dev/null || true; done
}
