#!/usr/bin/env bash
# Transactional mode claims optimistically: it looks the batch's keys up, runs the handler on those it did not find,
# then inserts them. Here another transaction (the rival handler, playing a zombie or a second instance during a
# rebalance) commits two of those keys, with their effect, while dedupd's batch is in its handler: dedupd's INSERT
# meets them on the primary key, and the batch is rolled back and run again at once with the pessimistic claim.
# What a user sees: every key's effect exactly once (the two by the rival, none of them by dedupd), the rival's
# outcome kept, the batch committed once, nobody's attempt counted, no backoff, no split, the offsets through, and
# the conflict logged and counted (dedupd_claim_conflicts_total). Once per message (handle) and once set-oriented
# (handle_batch). All in one partition, so r1 and r2 are in the first batch: after a conflict the topic claims
# pessimistically for a minute, and a rival key in a later batch would be dedupd's (the rival then fails to take it).
. "$(dirname "$0")/lib.sh"

sql "CREATE TABLE rival_effects (idem_key text NOT NULL, applied_by text NOT NULL)"
RIVAL="r1/PAY r2/PAY"

metric() { curl -s "http://$1/metrics" | awk -v s="$2" '$1 == s {print $2}'; }

# rival_config FILE NAMESPACE TOPIC PER_MESSAGE RIVAL_KEYS EXTRA: the rival handler on TOPIC, EXTRA a top-level line
rival_config() {
        cat >"$1" <<YAML
$(config_head | sed "s/^namespace: .*/namespace: $2/; /^workers:/d")
$6
kafka: {bootstrap.servers: "$KAFKA_BOOTSTRAP", group.id: "grp-$ID-$2"}
topics:
  - name: $3
    key: {subject: "{json:order_id}", action: PAY}
    handler:
      path: "$BUILD/tests/rival.so"
      per_message: $4
      config:
        dsn: "$TEST_DSN"
        namespace: "$2"
        rival_keys: "$5"
    batch: {max_messages: 100, max_wait_ms: 200}
    retry: {max_attempts: 2, backoff_ms: 20, backoff_max_ms: 100}
YAML
}

run_case() { # PER_MESSAGE
        local per=$1 T="conflict_${1}_$$" ns="it-$ID-$1"
        topic "$T" 2
        rival_config "$WORK/$per.yaml" "$ns" "$T" "$per" "r1/PAY,r2/PAY" 'http: {listen: "127.0.0.1:0"}'
        sql "TRUNCATE rival_effects"
        # 44 messages, 42 keys: r1 and r2 among the first, a repeat of r1 and of m5 later.
        { for i in $(seq 1 3); do printf '{"order_id":"m%d"}\n' "$i"; done
          printf '{"order_id":"r1"}\n{"order_id":"r2"}\n'
          for i in $(seq 4 40); do printf '{"order_id":"m%d"}\n' "$i"; done
          printf '{"order_id":"r1"}\n{"order_id":"m5"}\n'; } | "$KT" produce -t "$T" -p 0
        start "d-$per" "$WORK/$per.yaml"
        wait_done "$T" 60
        local addr conflicts retries
        addr=$(metrics_addr "d-$per")
        conflicts=$(metric "$addr" "dedupd_claim_conflicts_total{topic=\"$T\"}")
        retries=$(metric "$addr" "dedupd_batch_retries_total{topic=\"$T\"}")
        stop "d-$per"

        assert_eq "$(sql "SELECT count(*) || '/' || count(DISTINCT idem_key) FROM rival_effects")" 42/42 \
                "per_message=$per: effects/keys with an effect (each key's exactly once)"
        assert_eq "$(sql "SELECT string_agg(idem_key, ' ' ORDER BY idem_key) FROM rival_effects WHERE applied_by = 'rival'")" \
                "$RIVAL" "per_message=$per: keys the rival applied"
        assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$ns' AND idem_key IN ('r1/PAY','r2/PAY')
                           AND response = 'applied by the rival'")" 2 "per_message=$per: the rival's outcome kept"
        assert_eq "$(sql "SELECT count(*) FROM dedupd.keys k JOIN rival_effects e USING (idem_key) WHERE k.namespace = '$ns'
                           AND k.status = 'DONE' AND e.applied_by = 'dedupd' AND k.response = 'applied by dedupd'
                           AND k.topic = '$T' AND k.fingerprint IS NOT NULL")" 40 "per_message=$per: keys dedupd wrote, with their outcome"
        assert_eq "$(sql "SELECT consumed || '/' || applied || '/' || duplicates FROM
                           (SELECT sum(consumed) consumed, sum(applied) applied, sum(duplicates) duplicates
                            FROM dedupd.offsets WHERE namespace = '$ns' AND topic = '$T') o")" 44/40/4 \
                "per_message=$per: consumed/applied/duplicates"
        assert_eq "$(sql "SELECT sum(consumed) FROM dedupd.progress_log WHERE namespace = '$ns' AND topic = '$T'")" 44 \
                "per_message=$per: messages in committed batches (each batch committed once)"
        assert_eq "$("$KT" offsets -t "$T" -g "grp-$ID-$ns" | awk '$1=="total"{print $4}')" 0 "per_message=$per: Kafka consumer lag"

        # Logged once per conflict, naming a key the rival took; counted the same; no other retry of any kind.
        local lines named more
        lines=$(grep -c "was claimed by another transaction meanwhile: batch retried with a pessimistic claim" "$WORK/d-$per.log" || true)
        ((lines >= 1)) || fail "per_message=$per: the conflict was not logged"
        assert_eq "$conflicts" "$lines" "per_message=$per: dedupd_claim_conflicts_total (one per logged conflict)"
        named=$({ grep -o "key [^ ]* \(([^)]*) \)\?was claimed by another" "$WORK/d-$per.log" || true; } | awk '{print $2}')
        more=$({ grep -o "(and [0-9]* more) was claimed" "$WORK/d-$per.log" || true; } | awk '{s += $2} END {print s + 0}')
        for k in $named; do [[ " $RIVAL " == *" $k "* ]] || fail "per_message=$per: the log names $k, not a rival's key"; done
        assert_eq "$((lines + more))" 2 "per_message=$per: keys the logs say were claimed meanwhile"
        assert_eq "$retries" 0 "per_message=$per: dedupd_batch_retries_total (the conflict's retry is not a failed batch)"
        assert_eq "$(grep -c "not finished\|splitting it\|attempt [0-9]* of\|dead-lettered to" "$WORK/d-$per.log" || true)" 0 \
                "per_message=$per: backoffs, splits, attempts, dead letters"
}

# With partition workers, contention one lane met switches every lane: an
# optimistic batch (its handler's locks before its keys') and a pessimistic
# one (its keys' first) over the same keys can deadlock, and each deadlock
# costs deadlock_timeout (1 s) and an attempt of the batch. Partition 0 (the
# first worker) meets the rival on r1; then r3, a rival key, comes on
# partition 1 (the second worker): claimed first, it is dedupd's, and the
# rival, finding dedupd's row, gives up (before: the second worker still
# claimed optimistically, and the rival took r3 from it too).
run_workers_case() {
        local T="conflict_workers_$$" ns="it-$ID-workers"
        topic "$T" 2
        rival_config "$WORK/workers.yaml" "$ns" "$T" false "r1/PAY,r3/PAY" "workers: 2"
        sql "TRUNCATE rival_effects"
        printf '{"order_id":"w1"}\n{"order_id":"r1"}\n{"order_id":"w2"}\n' | "$KT" produce -t "$T" -p 0
        start d-workers "$WORK/workers.yaml"
        wait_done "$T" 60
        grep -q "2 partition workers" "$WORK/d-workers.log" || fail "workers: not two partition workers: $(head -3 "$WORK/d-workers.log")"
        assert_eq "$(grep -c "was claimed by another transaction meanwhile" "$WORK/d-workers.log")" 1 \
                "workers: conflicts on the first worker"
        printf '{"order_id":"w3"}\n{"order_id":"r3"}\n' | "$KT" produce -t "$T" -p 1
        wait_done "$T" 60
        stop d-workers
        assert_eq "$(sql "SELECT string_agg(idem_key || ' ' || applied_by, ', ' ORDER BY idem_key) FROM rival_effects")" \
                "r1/PAY rival, r3/PAY dedupd, w1/PAY dedupd, w2/PAY dedupd, w3/PAY dedupd" \
                "workers: who applied each key (r3 claimed first on the second worker)"
        assert_eq "$(grep -c "was claimed by another transaction meanwhile" "$WORK/d-workers.log")" 1 \
                "workers: conflicts (none on the second worker)"
}

run_case true
run_case false
run_workers_case
log "ok: a key committed by another transaction between the look and the insert is applied once, by its owner; the batch retried at once, pessimistically"
