#!/usr/bin/env bash
# Competing consumers on one RabbitMQ queue, and no crash at all: two, then
# three dedupd processes started together on a loaded queue (thousands of
# payments, with duplicates; the later ones the moment the first has counted
# its first batch). RabbitMQ has no offsets: each instance numbers its own
# deliveries from the queue's next_offset, so at a common start every
# instance's first batch begins at the same number, and each counts that start
# in the crash-loop ledger. A live peer's unfinished start must not be taken
# for a crash: the guard runs nothing one message at a time (no log line,
# dedupd_quarantines_total 0 on every instance), nothing is dead-lettered,
# every key has exactly one effect or one recorded rejection, balances add up,
# and the ledger is empty at the end.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rmq_lib.sh"

Q="pay_compete_$$"
X="compete_dlx_$$"
export SEED_ACCOUNTS=50 INITIAL_BALANCE=100000 BATCH_MAX=200 PREFETCH=400
rmq_define "{\"queues\":[{\"name\":\"$Q\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}},
  {\"name\":\"$Q.letters\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}}],
 \"exchanges\":[{\"name\":\"$X\",\"vhost\":\"/\",\"type\":\"direct\",\"durable\":true,\"auto_delete\":false,\"internal\":false,\"arguments\":{}}],
 \"bindings\":[{\"source\":\"$X\",\"vhost\":\"/\",\"destination\":\"$Q.letters\",\"destination_type\":\"queue\",\"routing_key\":\"$Q.dlq\",\"arguments\":{}}]}"
rmq_write_config "$WORK/c.yaml" "$Q" "" "  dead_letter: {exchange: $X}
http:
  listen: \"127.0.0.1:0\""

# metrics NAME: instance NAME's /metrics (the address it logged)
metrics() {
        local addr=""
        for ((i = 0; i < 100; i++)); do
                addr=$(sed -n 's#.*serving /metrics, /healthz and /readyz on http://\([0-9.:]*\).*#\1#p' "$WORK/$1.log" | tail -n 1)
                [[ -n $addr ]] && break
                sleep 0.1
        done
        [[ -n $addr ]] || fail "$1 did not say where it serves /metrics"
        curl -s "http://$addr/metrics"
}

# round R INSTANCES MSGS ORDERS: publish a workload of MSGS payments for ORDERS
# orders (prefix rR-), start INSTANCES dedupd processes at once, drain the
# queue, check each instance's guard and stop them all cleanly
round() {
        local r=$1 n=$2 names=() name
        workload "$WORK/w$r.txt" "$WORK/k$r.txt" "$3" "$4"
        sed -i "s/\"o-/\"r$r-/" "$WORK/w$r.txt"
        sed -i "s/^o-/r$r-/" "$WORK/k$r.txt"
        cat "$WORK/k$r.txt" >>"$WORK/keys.txt"
        rmq_publish "$Q" <"$WORK/w$r.txt"
        assert_eq "$(rmq_messages "$Q")" "$3" "round $r: messages in the queue"
        for ((k = 1; k <= n; k++)); do names+=("r${r}d$k"); done
        # The first, and the others as soon as its first batch is counted.
        start "${names[0]}" "$WORK/c.yaml"
        for ((i = 0; i < 300; i++)); do
                [[ $(sql "SELECT count(*) FROM dedupd.attempts") != 0 ]] && break
                sleep 0.05
        done
        for name in "${names[@]:1}"; do start "$name" "$WORK/c.yaml"; done
        rmq_wait_empty "$Q" 180
        for name in "${names[@]}"; do
                metrics "$name" >"$WORK/$name.metrics"
                assert_eq "$(awk -v q="dedupd_quarantines_total{topic=\"$Q\"}" '$1==q{print $2}' "$WORK/$name.metrics")" 0 \
                        "round $r: $name's dedupd_quarantines_total"
                grep -q "dedupd_messages_total{topic=\"$Q\",outcome=\"applied\"} [1-9]" "$WORK/$name.metrics" ||
                        fail "round $r: $name applied nothing: the round did not compete"
        done
        for name in "${names[@]}"; do stop "$name"; done
        for name in "${names[@]}"; do
                if grep -h "one message at a time\|crash loop" "$WORK/$name.log"; then
                        fail "round $r: $name took a live peer's batch for a crash"
                fi
        done
        # The case in point happened: an instance's first batch began inside
        # a live peer's, and the guard said so instead of counting a crash.
        met=$(for name in "${names[@]}"; do cat "$WORK/$name.log"; done | grep -c "is in a batch that live instances\{0,1\} .* in flight: not a crash" || true)
        ((met > 0)) || fail "round $r: no instance met a live peer's batch in flight: the test did not test it"
        log "ok: round $r: $n competing instances, no message run alone, $met start(s) inside a live peer's batch; $(sql "SELECT count(*) FROM dedupd.attempts") ledger rows left"
}

# The schema and the handler's tables first (three handlers creating them at
# once would race), then a handler whose batch takes a second while a batch
# start is counted in the ledger (an instance's first batch): a peer starting
# meanwhile finds that start still in flight, however busy the machine is.
"$DEDUPCTL" migrate -c "$WORK/c.yaml" >"$WORK/migrate.out" 2>&1 || fail "dedupctl migrate: $(cat "$WORK/migrate.out")"
sql 'CREATE FUNCTION slow_batch() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN
       IF EXISTS (SELECT 1 FROM dedupd.attempts) THEN PERFORM pg_sleep(1); END IF; RETURN NULL; END$$;
     CREATE TRIGGER slow_batch AFTER INSERT ON transfer_ledger FOR EACH STATEMENT EXECUTE FUNCTION slow_batch()'
: >"$WORK/keys.txt"
round 1 2 4000 3000
round 2 3 6000 4500

check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" 7500 "distinct keys recorded"
assert_eq "$(sql "SELECT sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$Q'")" 0 "dead-lettered"
assert_eq "$(rmq_messages "$Q.letters")" 0 "dead letters in $Q.letters"
assert_eq "$(sql "SELECT count(*) FROM dedupd.attempts")" 0 "crash-loop ledger rows left"
counted=$(sql "SELECT sum(applied) + sum(rejected) + sum(duplicates) FROM dedupd.offsets WHERE topic = '$Q'")
assert_eq "$(sql "SELECT sum(consumed) FROM dedupd.progress_log WHERE topic = '$Q'")" 10000 "deliveries committed (each once: nothing was redelivered)"
log "effects: $(sql "SELECT count(*) FROM transfer_ledger"), rejections: $(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'FAILED'"), outcomes counted: $counted"
