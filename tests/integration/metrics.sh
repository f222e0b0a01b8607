#!/usr/bin/env bash
# The operator's view, through a real Prometheus (Debian's package): it scrapes
# dedupd's /metrics during a known workload, and what its query API returns
# equals what the database says happened — applied, duplicates, rejections,
# dead letters, batches, lag 0. /healthz answers while /readyz flips to 503
# naming the database when PostgreSQL stops, and back to 200 when it returns.
. "$(dirname "$0")/lib.sh"

PROM_PID=""
on_exit '[[ -z $PROM_PID ]] || kill "$PROM_PID" 2>/dev/null'


T="pay_metrics_$$"
export SEED_ACCOUNTS=50 INITIAL_BALANCE=1000
topic "$T" 2
write_config "$WORK/c.yaml" "$T"
cat >>"$WORK/c.yaml" <<EOF
http:
  listen: "127.0.0.1:0"
  gauges_interval_ms: 1000
EOF
sed -i 's/^kafka:$/kafka:\n  statistics.interval.ms: "1000"/' "$WORK/c.yaml"
start d1 "$WORK/c.yaml"
for ((i = 0; i < 100; i++)); do
        ADDR=$(sed -n 's#.*serving /metrics, /healthz and /readyz on http://\([0-9.:]*\).*#\1#p' "$WORK/d1.log")
        [[ -n $ADDR ]] && break
        sleep 0.1
done
[[ -n $ADDR ]] || fail "dedupd did not say where it serves: $(tail -5 "$WORK/d1.log")"
get() { curl -s -o "$WORK/body" -w '%{http_code}' "http://$ADDR$1"; }
for ((i = 0; i < 200; i++)); do [[ $(get /readyz) == 200 ]] && break; sleep 0.1; done
assert_eq "$(get /readyz)" 200 "/readyz once in the group"
assert_eq "$(get /healthz)" 200 "/healthz"
assert_eq "$(get /nothing)" 404 "an unknown path"
assert_eq "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$ADDR/metrics")" 405 "POST /metrics"

# 3,000 payments for 2,000 orders (some rejected for the balance), and 7 that cannot be keyed.
workload "$WORK/w.txt" "$WORK/keys.txt" 3000 2000
for i in 1 2 3 4 5 6 7; do echo "not json $i"; done >>"$WORK/w.txt"
"$KT" produce -t "$T" <"$WORK/w.txt"
wait_done "$T" 120

# Prometheus scrapes it every second.
PROM_PORT=$(free_port)
cat >"$WORK/prometheus.yml" <<EOF
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: dedupd
    static_configs: [{targets: ["$ADDR"]}]
EOF
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
        --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$WORK/prometheus.log" 2>&1 &
PROM_PID=$!
# promql EXPR: the single value Prometheus has for it now ("" when none)
promql() {
        curl -s "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" |
                sed -n 's/.*"value":\[[^,]*,"\([^"]*\)"\].*/\1/p'
}
applied=$(sql "SELECT count(*) FROM transfer_ledger")
rejected=$(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'FAILED'")
keyed=$(sql "SELECT count(*) FROM dedupd.keys")
duplicates=$((3000 - keyed))
# Wait until Prometheus has a scrape taken after the lag reached 0.
for ((i = 0; i < 300; i++)); do
        [[ $(promql 'sum(dedupd_consumer_lag{job="dedupd"})') == 0 &&
                $(promql 'sum(dedupd_messages_total{job="dedupd"})') == 3007 ]] && break
        sleep 0.2
done
assert_eq "$(promql 'up{job="dedupd"}')" 1 "Prometheus scrapes dedupd"
assert_eq "$(promql "dedupd_messages_total{topic=\"$T\",outcome=\"applied\"}")" "$applied" "applied, as Prometheus has it"
assert_eq "$(promql "dedupd_messages_total{topic=\"$T\",outcome=\"rejected\"}")" "$rejected" "rejected"
assert_eq "$(promql "dedupd_messages_total{topic=\"$T\",outcome=\"duplicate\"}")" "$duplicates" "duplicates absorbed"
assert_eq "$(promql "dedupd_messages_total{topic=\"$T\",outcome=\"dead_lettered\"}")" 7 "dead-lettered"
assert_eq "$(promql "sum(dedupd_consumer_lag{topic=\"$T\"})")" 0 "consumer lag after the workload"
batches=$(promql "dedupd_batch_messages_count{topic=\"$T\"}")
assert_eq "$(promql "dedupd_batch_messages_sum{topic=\"$T\"}")" 3007 "messages in the batch-size histogram"
assert_eq "$(promql "dedupd_batch_duration_seconds_count{topic=\"$T\"}")" "$batches" "one duration per batch"
assert_eq "$(promql "dedupd_batch_duration_seconds_bucket{topic=\"$T\",le=\"+Inf\"}")" "$batches" "the +Inf bucket"
assert_eq "$(promql 'dedupd_ready')" 1 "dedupd_ready"
assert_eq "$(promql 'count(dedupd_build_info{version!=""})')" 1 "dedupd_build_info"
assert_eq "$(promql 'dedupd_outbox_backlog')" 0 "outbox backlog"
log "ok: Prometheus reads $applied applied, $rejected rejected, $duplicates duplicates, 7 dead letters in $batches batches, lag 0"

# The database stops: not ready (and says why), still alive; back when it returns.
"$DEDUPD_SERVICES" pg-stop immediate
echo '{"order_id":"after-stop","user_id":1,"amount":1}' | "$KT" produce -t "$T"
for ((i = 0; i < 200; i++)); do [[ $(get /readyz) == 503 ]] && break; sleep 0.1; done
assert_eq "$(get /readyz)" 503 "/readyz with the database down"
grep -q "the database is unreachable" "$WORK/body" || fail "/readyz does not say why: $(cat "$WORK/body")"
assert_eq "$(get /healthz)" 200 "/healthz with the database down"
for ((i = 0; i < 100; i++)); do [[ $(promql 'dedupd_ready') == 0 ]] && break; sleep 0.2; done
assert_eq "$(promql 'dedupd_ready')" 0 "dedupd_ready, as Prometheus has it, with the database down"
(($(promql 'sum(dedupd_db_errors_total)') >= 1)) || fail "no database error counted"
"$DEDUPD_SERVICES" pg-start
for ((i = 0; i < 300; i++)); do [[ $(get /readyz) == 200 ]] && break; sleep 0.1; done
assert_eq "$(get /readyz)" 200 "/readyz once the database is back"
wait_done "$T" 60
stop d1
log "ok: /readyz flipped to 503 naming the database and back; /healthz stayed 200"
