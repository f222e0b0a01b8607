#!/usr/bin/env bash
# The crash-loop guard still counts a peer's real crash. Two dedupd instances
# compete for one RabbitMQ queue; instance A counts the start of its batch of
# five in the ledger and stops right there (fault point after_poll), holding
# all five deliveries (prefetch 5), while instance B lives and waits.
#   1. A is killed (kill -9): its database session ends with it, the broker
#      requeues the five, and B, numbering them from the same next_offset,
#      finds A's row: a crash of an instance that is gone, counted once — B
#      runs the range one message at a time, and every message takes effect
#      once.
#   2. A is only stopped (a stalled process: its session stays open), and
#      stays stopped past its lease (2 x batch.timeout_ms + 30 s): its row is
#      then a crash too, though its session still exists; B counts it the
#      same way.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rmq_lib.sh"
require_fault_points

# setup CASE: queue, dead-letter exchange and configs (A's and B's) for case CASE
setup() {
        Q="peer_crash$1_$$"
        X="peer_dlx$1_$$"
        rmq_define "{\"queues\":[{\"name\":\"$Q\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}},
  {\"name\":\"$Q.letters\",\"vhost\":\"/\",\"durable\":true,\"auto_delete\":false,\"arguments\":{}}],
 \"exchanges\":[{\"name\":\"$X\",\"vhost\":\"/\",\"type\":\"direct\",\"durable\":true,\"auto_delete\":false,\"internal\":false,\"arguments\":{}}],
 \"bindings\":[{\"source\":\"$X\",\"vhost\":\"/\",\"destination\":\"$Q.letters\",\"destination_type\":\"queue\",\"routing_key\":\"$Q.dlq\",\"arguments\":{}}]}"
        # B waits half a second before a batch: the redeliveries it gets the
        # moment A dies are looked at once A's database session has ended. A
        # takes the five (the broker pushes them one by one: a batch that closes
        # when nothing more is queued may hold fewer on a busy machine).
        # A's heartbeat is long: stopped, it misses every beat, and the broker
        # must not take the five back on its own before the test means it to
        # (a kill -9 closes the connection at once; case 2 closes it itself).
        for who in a b; do
                wait_ms=2000 adaptive=false heartbeat=300
                [[ $who == b ]] && wait_ms=500 heartbeat=5
                cat >"$WORK/$1$who.yaml" <<YAML
$(PREFETCH=5 HEARTBEAT=$heartbeat rmq_config_head)
  dead_letter: {exchange: $X}
http:
  listen: "127.0.0.1:0"
topics:
  - name: $Q
    key: {subject: "{json:order_id}", action: PAY}
    handler: {path: "$BUILD/tests/flaky.so"}
    batch: {max_messages: 100, max_wait_ms: $wait_ms, adaptive: $adaptive, timeout_ms: 100}
    retry: {max_attempts: 3, backoff_ms: 20, backoff_max_ms: 100, max_crashes: 3}
YAML
        done
        for o in "a$1" "b$1" "c$1" "d$1" "e$1"; do printf '{"order_id":"%s"}\n' "$o"; done | rmq_publish "$Q"
        assert_eq "$(rmq_messages "$Q")" 5 "case $1: messages in the queue"
}

# start_a CASE: instance A, stopped right after it counted its batch's start
start_a() {
        DEDUPD_FAULT="after_poll:1:stop" start "$1a" "$WORK/$1a.yaml"
        for ((i = 0; i < 300; i++)); do
                [[ $(ps -o stat= -p "${PIDS[$1a]}" 2>/dev/null) == T* ]] && break
                sleep 0.1
        done
        [[ $(ps -o stat= -p "${PIDS[$1a]}") == T* ]] || fail "case $1: A did not stop at after_poll"
        OWNER_A=$(sql "SELECT owner FROM dedupd.attempts WHERE topic = '$Q'")
        assert_eq "$(sql "SELECT \"offset\" || '..' || until_offset || ' x' || attempts FROM dedupd.attempts WHERE topic = '$Q'")" \
                "0..5 x1" "case $1: A's start in the ledger"
        BACKEND_A=$(sql "SELECT backend_pid FROM dedupd.instances WHERE owner = '$OWNER_A'")
        [[ -n $BACKEND_A ]] || fail "case $1: A ($OWNER_A) is not in dedupd.instances"
}

# wait_log NAME PATTERN: until NAME's log has a line matching PATTERN
wait_log() {
        for ((i = 0; i < 300; i++)); do
                grep -q "$2" "$WORK/$1.log" && return 0
                sleep 0.1
        done
        fail "$1 never logged '$2'"
}

# quarantines NAME: dedupd_quarantines_total of instance NAME's topic
quarantines() {
        local addr
        addr=$(sed -n 's#.*serving /metrics, /healthz and /readyz on http://\([0-9.:]*\).*#\1#p' "$WORK/$1.log" | tail -n 1)
        curl -s "http://$addr/metrics" | awk -v q="dedupd_quarantines_total{topic=\"$Q\"}" '$1==q{print $2}'
}

# b_counted CASE: B drained the queue after counting A's start as one crash
b_counted() {
        rmq_wait_empty "$Q" 60
        grep "one message at a time" "$WORK/$1b.log" | sed 's/^/    /'
        grep -q "offsets up to 4 were in a batch that crashed or stalled dedupd 1 time ($OWNER_A): running them one message at a time" \
                "$WORK/$1b.log" || fail "case $1: B did not count A's start as a crash"
        assert_eq "$(quarantines "$1b")" 5 "case $1: B's dedupd_quarantines_total (the range run one message at a time)"
        stop "$1b"
        assert_eq "$(sql "SELECT string_agg(idem_key, ',' ORDER BY idem_key) FROM flaky_effects WHERE idem_key LIKE '%$1/PAY'")" \
                "a$1/PAY,b$1/PAY,c$1/PAY,d$1/PAY,e$1/PAY" "case $1: effects, each once"
        assert_eq "$(sql "SELECT sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$Q'")" 0 "case $1: dead-lettered"
        assert_eq "$(rmq_messages "$Q.letters")" 0 "case $1: dead letters"
        assert_eq "$(sql "SELECT count(*) FROM dedupd.attempts WHERE topic = '$Q'")" 0 "case $1: ledger rows left"
}

# ---- 1. kill -9 while a peer lives ----
setup 1
start_a 1
start 1b "$WORK/1b.yaml"
wait_log 1b "consuming 1 queue(s)"
assert_eq "$(rmq_messages "$Q")" 5 "case 1: messages held (by A)"
crash 1a
for ((i = 0; i < 50; i++)); do
        [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE pid = $BACKEND_A") == 0 ]] && break
        sleep 0.1
done
assert_eq "$(sql "SELECT count(*) FROM pg_stat_activity WHERE pid = $BACKEND_A")" 0 "case 1: A's database sessions left"
b_counted 1
log "ok: a killed peer's start counted as a crash while the other instance lived"

# ---- 2. a stalled peer, past its lease ----
setup 2
start_a 2
for ((i = 0; i < 600; i++)); do
        [[ $(sql "SELECT lease_until < now() FROM dedupd.instances WHERE owner = '$OWNER_A'") == t ]] && break
        sleep 0.1
done
assert_eq "$(sql "SELECT lease_until < now() FROM dedupd.instances WHERE owner = '$OWNER_A'")" t "case 2: A's lease ran out"
# The broker takes the five back from the stopped A, if its missed heartbeats
# have not made it do so already (only A's connection: other tests' stay up).
rmq_close_connections "it-$ID"
log "A's connections the broker still had, now closed: $CLOSED"
for ((i = 0; i < 100; i++)); do
        [[ $(rmqctl list_queues name messages_ready | awk -v q="$Q" '$1==q{print $2}') == 5 ]] && break
        sleep 0.1
done
start 2b "$WORK/2b.yaml"
b_counted 2
assert_eq "$(sql "SELECT count(*) FROM pg_stat_activity WHERE pid = $BACKEND_A")" 1 "case 2: A's database session (still open: the lease decided)"
crash 2a
log "ok: a stalled peer's start counted as a crash once its lease ran out"
