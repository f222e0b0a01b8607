#!/usr/bin/env bash
# Values that dedupd's own statements cannot store cost one message, never its neighbours — on Kafka, NATS
# JetStream and RabbitMQ, the same bytes each time. A reply-to that is not UTF-8, one that names dedupd's own
# topic, and one outside reply.allow: the message is applied without its reply (logged, counted). And the
# general guard, for values no check knows about: a CHECK constraint the test adds to dedupd.outbox and a
# trigger on dedupd.keys refuse one message each; its batch is split until it runs alone, it is dead-lettered
# after retry.max_attempts with the database's reason, and everything around it applies once and drains.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"
. "$(dirname "$0")/rmq_lib.sh"

# The orders of one broker's run, each: ORDER REPLY_TO CORRELATION (reply-to "-": none). The refused replies
# share batches that trig1 rolls back (its reply fails after theirs were refused): counted once all the same.
orders() { # PREFIX REPLIES OWN
        local p=$1 r=$2 own=$3
        for i in $(seq 1 20); do echo "$p-g$i $r g$i"; done
        echo "$p-bad1 $(printf '\xff\xfe') x1"   # not UTF-8
        echo "$p-trig1 $r x4"                     # its outbox row fails the test's CHECK
        echo "$p-own1 $own x2"                    # dedupd's own input
        echo "$p-out1 elsewhere-$ID x3"           # not in reply.allow
        echo "$p-trig2 - -"                       # its key fails the test's trigger
        echo "$p-corr1 $r $(printf '\xc3\x28')"   # a correlation id that is not UTF-8
        for i in $(seq 21 40); do echo "$p-g$i $r g$i"; done
}
json() { printf '{"order_id":"%s","user_id":%d,"amount":10}\n' "$1" $((RANDOM % 90 + 1)); }

# The topic entry: transfer handler, replies only to REPLIES, small retry budget. BATCH: its
# batch settings (RabbitMQ's: see there).
topic_yaml() { # NAME REPLIES
        local batch=${BATCH:-"{max_messages: 100, max_wait_ms: 20}"}
        cat <<YAML
  - name: $1
    key: {subject: "{json:order_id}", action: PAY}
    handler: {path: "$BUILD/transfer.so", config: {seed_accounts: "100", initial_balance: "1000"}}
    batch: $batch
    retry: {max_attempts: 2, backoff_ms: 20, backoff_max_ms: 100}
    reply: {allow: ["$2"]}
YAML
}

metric() { curl -s "http://$1/metrics" | awk -v s="$2" '$1 == s {print $2}'; }

# What every broker must show. LETTERS: the dead letters as text; REPLIED: the good replies' correlation ids.
check() { # BROKER PREFIX LETTERS REPLIED ADDR
        local b=$1 p=$2
        assert_eq "$(grep -o 'dedupd.reason=[^;	]*' "$3" | wc -l)" 2 "$b: dead letters"
        for k in trig1 trig2; do
                grep -q "dedupd.key=$p-$k/PAY" "$3" || fail "$b: $p-$k not dead-lettered: $(cat "$3")"
        done
        assert_eq "$(grep -o 'dedupd.reason=[^;	]*' "$3" | grep -vc 'a statement of dedupd refused a value of it (SQLSTATE \(23514\|P0001\): .*) 2 times (retry.max_attempts)')" 0 \
                "$b: dead letters without the database's reason"
        assert_eq "$(grep -c 'Failing row' "$3")" 0 "$b: dead letters that quote the refused row's values"
        assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key LIKE '$p-%'")" 44 "$b: effects (46 orders but trig1 and trig2)"
        assert_eq "$(sql "SELECT count(*) FROM (SELECT idem_key FROM transfer_ledger GROUP BY 1 HAVING count(*) > 1) d")" 0 "$b: keys with two effects"
        assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE idem_key LIKE '$p-%' AND status = 'DONE'")" 44 "$b: DONE keys"
        assert_eq "$(grep -c '^g[0-9]*$' "$4")" 40 "$b: replies to the good orders"
        assert_eq "$(sort "$4" | uniq -d | wc -l)" 0 "$b: replies sent twice"
        assert_eq "$(metric "$5" "dedupd_replies_refused_total{topic=\"$6\",reason=\"invalid\"}")" 1 "$b: refused as invalid (not UTF-8)"
        assert_eq "$(metric "$5" "dedupd_replies_refused_total{topic=\"$6\",reason=\"not_allowed\"}")" 2 "$b: refused as not allowed (own, elsewhere)"
        (($(metric "$5" "dedupd_batch_splits_total{topic=\"$6\"}") >= 1)) || fail "$b: no split counted"
}

T="pv_$$" R="pv_replies_$$"
base_config() { # FILE SOURCE_YAML TOPIC REPLIES
        cat >"$1" <<YAML
$(config_head)
$2
http: {listen: "127.0.0.1:0"}
outbox: {interval_ms: 100}
topics:
$(topic_yaml "$3" "$4")
YAML
}

# Replies on and nowhere they must stay: check warns (and still passes); with reply.allow it does not.
base_config "$WORK/w.yaml" "kafka: {bootstrap.servers: \"$KAFKA_BOOTSTRAP\", group.id: \"grp-$ID\"}" "$T" "$R"
"$DEDUPCTL" check --offline -c "$WORK/w.yaml" >"$WORK/w.out" 2>&1 || fail "check with reply.allow: $(cat "$WORK/w.out")"
grep -q "warning" "$WORK/w.out" && fail "check warns with reply.allow set: $(cat "$WORK/w.out")"
sed -i '/reply: {allow:/d' "$WORK/w.yaml"
"$DEDUPCTL" check --offline -c "$WORK/w.yaml" >"$WORK/w.out" 2>&1 || fail "check without reply.allow failed: $(cat "$WORK/w.out")"
grep -q "warning: topic '$T': replies go wherever a message's 'reply-to' header names" "$WORK/w.out" ||
        fail "check does not warn about replies without reply.allow: $(cat "$WORK/w.out")"

# dedupd's schema first, then what the test adds to it.
base_config "$WORK/m.yaml" "kafka: {bootstrap.servers: \"$KAFKA_BOOTSTRAP\", group.id: \"grp-$ID\"}" "$T" "$R"
"$DEDUPCTL" migrate -c "$WORK/m.yaml" >/dev/null
sql "ALTER TABLE dedupd.outbox ADD CONSTRAINT test_refuses CHECK (idem_key IS NULL OR idem_key NOT LIKE '%-trig1/PAY');
     CREATE FUNCTION test_refuse_key() RETURNS trigger LANGUAGE plpgsql AS \$f\$ BEGIN
       IF NEW.idem_key LIKE '%-trig2/PAY' THEN RAISE EXCEPTION 'test: key % refused', NEW.idem_key; END IF;
       RETURN NEW; END \$f\$;
     CREATE TRIGGER test_refuse_key BEFORE INSERT ON dedupd.keys FOR EACH ROW EXECUTE FUNCTION test_refuse_key()"

# ---- Kafka: headers -----------------------------------------------------------------------------
topic "$T" 1
"$KT" create -t "$R" -p 1 >/dev/null
base_config "$WORK/k.yaml" "kafka: {bootstrap.servers: \"$KAFKA_BOOTSTRAP\", group.id: \"grp-$ID\"}" "$T" "$R"
orders k "$R" "$T" | while read -r o to c; do
        if [[ $to == - ]]; then json "$o" | "$KT" produce -t "$T"
        else json "$o" | "$KT" produce -t "$T" -H "reply-to=$to" -H "correlation-id=$c"; fi
done
start dk "$WORK/k.yaml"
ADDR=$(metrics_addr dk)
wait_done "$T" 60
for ((i = 0; i < 100; i++)); do [[ $(produced "$R") -ge 41 ]] && break; sleep 0.1; done
"$KT" dump -t "$T.dlq" >"$WORK/k.dlq"
"$KT" dump -t "$R" | awk '/^0 /{print $3}' >"$WORK/k.replies"
check kafka k "$WORK/k.dlq" "$WORK/k.replies" "$ADDR" "$T"
stop dk

# ---- NATS JetStream: headers ------------------------------------------------------------------------
NR="pvr.$ID"
"$NT" stream "$STREAM" "$SUBJ" "$DLQ_SUBJ" "$NR"
base_config "$WORK/n.yaml" "source: nats
nats: {url: \"$NATS_URL\", stream: $STREAM, durable: $DURABLE, ack_wait_ms: 2000, dead_letter: {subject: $DLQ_SUBJ}}" "$SUBJ" "$NR"
orders n "$NR" "$SUBJ" | while read -r o to c; do
        if [[ $to == - ]]; then json "$o" | publish
        else json "$o" | publish "reply-to:$to" "correlation-id:$c"; fi
done
start dn "$WORK/n.yaml"
ADDR=$(metrics_addr dn)
nats_done 60
for ((i = 0; i < 100; i++)); do [[ $("$NT" dump "$STREAM" "$NR" | wc -l) -ge 41 ]] && break; sleep 0.1; done
"$NT" dump "$STREAM" "$DLQ_SUBJ" >"$WORK/n.dlq"
"$NT" dump "$STREAM" "$NR" | grep -oP '(^|[;\t])correlation-id=\K[^;\t]*' >"$WORK/n.replies"
check nats n "$WORK/n.dlq" "$WORK/n.replies" "$ADDR" "$SUBJ"
stop dn

# ---- RabbitMQ: AMQP header field values ----------------------------------------------------------------
Q="pvq_$$" X="pvx_$$"
rmq_define "{\"queues\":[{\"name\":\"$Q\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}},
  {\"name\":\"$X.q\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}},
  {\"name\":\"$Q.letters\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}}],
 \"exchanges\":[{\"name\":\"$X\",\"vhost\":\"/\",\"type\":\"fanout\",\"durable\":true,\"auto_delete\":false,\"internal\":false,\"arguments\":{}},
  {\"name\":\"dlx_$$\",\"vhost\":\"/\",\"type\":\"fanout\",\"durable\":true,\"auto_delete\":false,\"internal\":false,\"arguments\":{}}],
 \"bindings\":[{\"source\":\"$X\",\"vhost\":\"/\",\"destination\":\"$X.q\",\"destination_type\":\"queue\",\"routing_key\":\"\",\"arguments\":{}},
  {\"source\":\"dlx_$$\",\"vhost\":\"/\",\"destination\":\"$Q.letters\",\"destination_type\":\"queue\",\"routing_key\":\"\",\"arguments\":{}}]}"
# The first batch takes all 46 messages, as a fetch from Kafka or NATS does: RabbitMQ pushes
# them one by one, and a batch that closes when nothing more is queued may hold two (under a
# loaded machine). A refused reply is counted each time its message is tried, so a different
# first batch, split differently, counts it more than once.
BATCH="{max_messages: 100, max_wait_ms: 500, adaptive: false}" base_config "$WORK/r.yaml" "source: rabbitmq
rabbitmq: {url: \"\${RMQ_TEST_URL}\", prefetch: 500, dead_letter: {exchange: dlx_$$}}" "$Q" "$X"
orders r "$X" "$Q" | while read -r o to c; do
        if [[ $to == - ]]; then json "$o" | rmq_publish "$Q"
        else json "$o" | rmq_publish "$Q" -H "reply-to: $to" -H "correlation-id: $c"; fi
done
start dr "$WORK/r.yaml"
ADDR=$(metrics_addr dr)
rmq_wait_empty "$Q" 60
for ((i = 0; i < 100; i++)); do [[ $(rmq_messages "$X.q") -ge 41 ]] && break; sleep 0.1; done
rmq_dead_letters "$Q.letters" "$WORK/r.dlq"
rmq_dead_letters "$X.q" "$WORK/r.all"
sed -n 's/^header correlation-id=//p' "$WORK/r.all" >"$WORK/r.replies"
check rabbitmq r "$WORK/r.dlq" "$WORK/r.replies" "$ADDR" "$Q"
stop dr
log "ok: on all three brokers, a value dedupd cannot store costs its message alone"
