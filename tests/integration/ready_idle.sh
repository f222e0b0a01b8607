#!/usr/bin/env bash
# Readiness that tells the truth while nothing arrives: with the topic idle,
# PostgreSQL stopped turns /readyz 503 naming the database (and dedupd_ready
# 0) within 10 s — no batch has to fail for it — and 200 again once it is
# back; the same for the broker: NATS here (it restarts in a moment), the
# Kafka broker too with READY_IDLE_KAFKA=1 (its restart alone takes ~20 s).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"

T="pay_ready_$$"
topic "$T" 2
write_config "$WORK/c.yaml" "$T"
cat >>"$WORK/c.yaml" <<EOF
http:
  listen: "127.0.0.1:0"
EOF
# Whether a broker is back comes with librdkafka's statistics: every second here.
sed -i 's/^kafka:$/kafka:\n  statistics.interval.ms: "1000"/' "$WORK/c.yaml"
# serve NAME CONFIG: start dedupd NAME and set ADDR to where it serves /readyz
serve() {
        start "$1" "$2"
        for ((i = 0; i < 100; i++)); do
                ADDR=$(sed -n 's#.*serving /metrics, /healthz and /readyz on http://\([0-9.:]*\).*#\1#p' "$WORK/$1.log")
                [[ -n $ADDR ]] && break
                sleep 0.1
        done
        [[ -n $ADDR ]] || fail "dedupd did not say where it serves: $(tail -5 "$WORK/$1.log")"
}
serve d1 "$WORK/c.yaml"
get() { curl -s -o "$WORK/body" -w '%{http_code}' "http://$ADDR$1"; }
ready_metric() { curl -s "http://$ADDR/metrics" | awk '$1 == "dedupd_ready" {print $2}'; }
# wait_ready CODE SECONDS: until /readyz answers CODE, or SECONDS have passed
wait_ready() {
        for ((i = 0; i < $2 * 10; i++)); do
                [[ $(get /readyz) == "$1" ]] && return 0
                sleep 0.1
        done
}

echo '{"order_id":"o-1","user_id":1,"amount":10}' | "$KT" produce -t "$T"
wait_done "$T" 30
wait_ready 200 30
assert_eq "$(get /readyz)" 200 "/readyz, in the group, the order applied"
# From here on nothing is produced while a server is down: no batch fails to tell.

"$DEDUPD_SERVICES" pg-stop immediate
on_exit '"$DEDUPD_SERVICES" pg-start >/dev/null'
wait_ready 503 10
assert_eq "$(get /readyz)" 503 "/readyz within 10 s of PostgreSQL stopping, the topic idle"
log "/readyz: $(cat "$WORK/body")"
grep -q "the database is unreachable" "$WORK/body" || fail "/readyz does not say why: $(cat "$WORK/body")"
assert_eq "$(ready_metric)" 0 "dedupd_ready with the database down"
assert_eq "$(get /healthz)" 200 "/healthz with the database down"
"$DEDUPD_SERVICES" pg-start
wait_ready 200 30
assert_eq "$(get /readyz)" 200 "/readyz once PostgreSQL is back"
assert_eq "$(ready_metric)" 1 "dedupd_ready once PostgreSQL is back"

# What is produced afterwards is applied: nothing was left stuck.
echo '{"order_id":"o-2","user_id":2,"amount":10}' | "$KT" produce -t "$T"
wait_done "$T" 60

if [[ -n ${READY_IDLE_KAFKA:-} ]]; then
        "$DEDUPD_SERVICES" kafka-stop
        on_exit '"$DEDUPD_SERVICES" kafka-start >/dev/null'
        wait_ready 503 10
        assert_eq "$(get /readyz)" 503 "/readyz within 10 s of the Kafka broker stopping"
        log "/readyz: $(cat "$WORK/body")"
        grep -q "the broker is unreachable: Kafka" "$WORK/body" || fail "/readyz does not name the broker: $(cat "$WORK/body")"
        assert_eq "$(ready_metric)" 0 "dedupd_ready with the Kafka broker down"
        "$DEDUPD_SERVICES" kafka-start
        wait_ready 200 60
        assert_eq "$(get /readyz)" 200 "/readyz once the Kafka broker is back"
fi
stop d1
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 2 "orders applied (Kafka)"

# The broker's connection, NATS: lost while idle, not ready naming it; back, ready.
nats_stream
write_nats_config "$WORK/n.yaml"
printf 'http:\n  listen: "127.0.0.1:0"\n' >>"$WORK/n.yaml"
serve n1 "$WORK/n.yaml"
wait_ready 200 30
assert_eq "$(get /readyz)" 200 "/readyz (NATS), consuming"
"$DEDUPD_SERVICES" nats-stop
on_exit '"$DEDUPD_SERVICES" nats-start >/dev/null'
wait_ready 503 10
assert_eq "$(get /readyz)" 503 "/readyz within 10 s of nats-server stopping"
log "/readyz: $(cat "$WORK/body")"
grep -q "the broker is unreachable: NATS" "$WORK/body" || fail "/readyz does not name the broker: $(cat "$WORK/body")"
assert_eq "$(ready_metric)" 0 "dedupd_ready with nats-server down"
"$DEDUPD_SERVICES" nats-start
wait_ready 200 30
assert_eq "$(get /readyz)" 200 "/readyz once nats-server is back"
echo '{"order_id":"n-1","user_id":3,"amount":10}' | publish
nats_done 30
stop n1
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 3 "orders applied (Kafka and NATS)"
