#!/usr/bin/env bash
# NATS JetStream: a consumer of the name dedupd would give its own, made by
# someone else, is refused rather than pulled: a push consumer (it would
# refuse every pull request and dedupd would wait for ever), or a pull
# consumer of another subject (its messages would be taken for the topic's).
# dedupd gives up after startup_timeout_ms (exit 1) naming the consumer and
# what is wrong with it; the messages are left alone.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"

# js_api SUBJECT JSON: one JetStream API request on a bare connection (the protocol as text), its answer on stdout
js_api() {
        local hostport=${NATS_URL#nats://} line inbox="_INBOX.t_$ID"
        exec 7<>"/dev/tcp/${hostport%:*}/${hostport##*:}"
        printf 'CONNECT {"verbose":false}\r\nSUB %s 1\r\nPUB %s %s %d\r\n%s\r\n' "$inbox" "$1" "$inbox" "${#2}" "$2" >&7
        while read -r -t 5 line <&7; do
                [[ $line == MSG* ]] && { read -r -t 5 line <&7; echo "$line"; break; }
                [[ $line == PING* ]] && printf 'PONG\r\n' >&7
        done
        exec 7>&-
}

# refused KIND CONSUMER_JSON EXPECTED: dedupd, finding CONSUMER under its consumer's name, exits 1 saying EXPECTED
refused() {
        local rc=0
        js_api "\$JS.API.CONSUMER.DURABLE.CREATE.$STREAM.$CONSUMER" "$2" >"$WORK/$1.api"
        grep -q '"type":"io.nats.jetstream.api.v1.consumer_create_response"' "$WORK/$1.api" && ! grep -q '"error"' "$WORK/$1.api" ||
                fail "could not make the $1 consumer: $(cat "$WORK/$1.api")"
        timeout 60 "$DEDUPD" -c "$WORK/c.yaml" >"$WORK/$1.log" 2>&1 || rc=$? # (124: it never gave up)
        assert_eq "$rc" 1 "dedupd finding a $1 consumer under its name exits"
        grep -q "$3" "$WORK/$1.log" || fail "dedupd does not say what is wrong with the $1 consumer: $(grep -m3 'nats' "$WORK/$1.log")"
        log "ok: $(grep -o "$3" "$WORK/$1.log" | head -n 1)"
        js_api "\$JS.API.CONSUMER.DELETE.$STREAM.$CONSUMER" "" >/dev/null
}

nats_stream
write_nats_config "$WORK/c.yaml"
sed -i "s|^shutdown_timeout_ms: 15000|startup_timeout_ms: 3000\nshutdown_timeout_ms: 15000|" "$WORK/c.yaml"
echo '{"order_id":"f-1","user_id":3,"amount":10}' | publish

refused push "{\"stream_name\":\"$STREAM\",\"config\":{\"durable_name\":\"$CONSUMER\",\"deliver_subject\":\"push.$ID\",\"ack_policy\":\"explicit\",\"filter_subject\":\"$SUBJ\"}}" \
        "consumer $CONSUMER is a push consumer (deliver subject push.$ID): dedupd pulls"
refused other-subject "{\"stream_name\":\"$STREAM\",\"config\":{\"durable_name\":\"$CONSUMER\",\"ack_policy\":\"explicit\",\"filter_subject\":\"$DLQ_SUBJ\"}}" \
        "consumer $CONSUMER takes subject $DLQ_SUBJ, not $SUBJ"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" 0 "keys recorded"

# Its own consumer, once the foreign one is gone: the message is applied.
start d1 "$WORK/c.yaml"
nats_done
stop d1
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 3")" 990 "balance once dedupd's own consumer pulls"
