#!/usr/bin/env bash
# The end of a key's life: keys expire at created_at + keep; purge takes responses first, then
# exactly the expired DONE/FAILED keys, never a PENDING one, never before expires_at; two purges at
# once split the work; the daemon purges on its own; a class shorter than its topic's retention.ms
# is refused; plan reproduces the seed's 10,000/s x 48 h = 1.73 billion rows.
. "$(dirname "$0")/lib.sh"

NS="it-$ID"
T="pay_ret_$$"
topic "$T" 1

# keep 12s, responses 5s: long enough to look before anything expires, short enough to wait for.
CLASS="    retention: short
retention_classes:
  short:
    keep: 12s
    max_retry: 1s
    response_ttl: 5s
    allow_shorter_than_topic: true"
SEED_ACCOUNTS=20 INITIAL_BALANCE=30 write_config "$WORK/ret.yaml" "$T" "$CLASS
purge:
  interval_ms: 0"

# 60 orders (some rejected: balance 30, amounts up to 70), each sent twice.
for i in $(seq 1 60); do
        printf '{"order_id":"r-%d","user_id":%d,"amount":%d}\n' "$i" $((i % 20 + 1)) $(((i % 7 + 1) * 10))
done >"$WORK/orders.json"
cat "$WORK/orders.json" "$WORK/orders.json" | "$KT" produce -t "$T"
start d1 "$WORK/ret.yaml"
wait_done "$T"
stop d1

keys=$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS'")
assert_eq "$keys" 60 "keys after the run"
failed=$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS' AND status = 'FAILED'")
[[ $failed -gt 0 ]] || fail "expected some FAILED keys (rejections), got none"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS' AND expires_at IS DISTINCT FROM created_at + interval '12 seconds'")" 0 \
        "keys whose expires_at is not created_at + keep"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS' AND response_expires_at IS DISTINCT FROM created_at + interval '5 seconds'")" 0 \
        "keys whose response_expires_at is not created_at + response_ttl"
with_response=$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS' AND response IS NOT NULL")
assert_eq "$with_response" 60 "keys with a stored response"
fingerprints=$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS' AND fingerprint IS NOT NULL")

"$DEDUPCTL" inspect -c "$WORK/ret.yaml" r-1/PAY >"$WORK/inspect.out"
grep -q "^expires_at  *20" "$WORK/inspect.out" || fail "inspect shows no expires_at: $(cat "$WORK/inspect.out")"
grep -q "^response_expires_at  *20" "$WORK/inspect.out" || fail "inspect shows no response_expires_at: $(cat "$WORK/inspect.out")"
log "ok: inspect shows expires_at and response_expires_at"

# What purge must never touch: a PENDING key long past its expires_at, a key without
# expires_at (no class), another namespace's expired key.
sql "INSERT INTO dedupd.keys (namespace, idem_key, status, created_at, expires_at)
     VALUES ('$NS', 'stuck/PAY', 'PENDING', now() - interval '2 days', now() - interval '1 day'),
            ('$NS', 'forever/PAY', 'DONE', now() - interval '400 days', NULL),
            ('other-$ID', 'x/PAY', 'DONE', now() - interval '2 days', now() - interval '1 day')"

# purge_count FILE WHAT: the number on a purge output line ("keys deleted:", ...)
purge_count() { awk -v w="$2" 'index($0, w) == 1 { sub(w, ""); print $1 + 0 }' "$1"; }

# Before anything expired: nothing goes.
"$DEDUPCTL" purge -c "$WORK/ret.yaml" >"$WORK/purge0.out"
cat "$WORK/purge0.out"
assert_eq "$(sql "SELECT now() < min(response_expires_at) FROM dedupd.keys WHERE namespace = '$NS' AND response_expires_at IS NOT NULL")" t \
        "the first purge ran before any response expired (else raise response_ttl)"
assert_eq "$(purge_count "$WORK/purge0.out" "keys deleted:")" 0 "keys deleted before expiry"
assert_eq "$(purge_count "$WORK/purge0.out" "responses dropped:")" 0 "responses dropped before response_ttl"
assert_eq "$(purge_count "$WORK/purge0.out" "PENDING keys left alone:")" 1 "PENDING keys past expires_at reported"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS'")" 62 "keys after the early purge"

# wait_sql CONDITION SECONDS: until the database's clock says so
wait_sql() {
        for ((i = 0; i < $2 * 10; i++)); do
                [[ $(sql "SELECT $1") == t ]] && return 0
                sleep 0.1
        done
        fail "timed out waiting for: $1"
}

# Responses expire first: dropped, keys and fingerprints stay.
wait_sql "now() > (SELECT max(response_expires_at) FROM dedupd.keys WHERE namespace = '$NS')" 30
"$DEDUPCTL" purge -c "$WORK/ret.yaml" --batch 7 >"$WORK/purge1.out"
cat "$WORK/purge1.out"
assert_eq "$(sql "SELECT now() < min(expires_at) FROM dedupd.keys WHERE namespace = '$NS' AND status <> 'PENDING' AND expires_at IS NOT NULL")" t \
        "the second purge ran before any key expired (else raise keep)"
assert_eq "$(purge_count "$WORK/purge1.out" "responses dropped:")" 60 "responses dropped after response_ttl"
assert_eq "$(purge_count "$WORK/purge1.out" "keys deleted:")" 0 "keys deleted after response_ttl but before keep"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS' AND response IS NOT NULL")" 0 "responses left"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS' AND status IN ('DONE','FAILED') AND expires_at IS NOT NULL")" 60 "keys left once responses are gone"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS' AND fingerprint IS NOT NULL")" "$fingerprints" "fingerprints kept"

# Keys expire: the dry run counts exactly them and changes nothing; the purge deletes exactly them.
wait_sql "now() > (SELECT max(expires_at) FROM dedupd.keys WHERE namespace = '$NS' AND status <> 'PENDING')" 30
progress=$(sql "SELECT count(*) FROM dedupd.progress_log WHERE namespace = '$NS' AND committed_at < now() - interval '12 seconds'")
[[ $progress -gt 0 ]] || fail "expected progress_log rows older than keep"
# Two fingerprint mismatches, one older than the progress keep: it goes with the progress, the new one stays.
sql "INSERT INTO dedupd.mismatches (namespace, topic, partition, \"offset\", idem_key, first_fingerprint, fingerprint, verdict, noticed_at)
     VALUES ('$NS', '$T', 0, 900001, 'old/PAY', 'aa', 'bb', 'absorbed', now() - interval '1 hour'),
            ('$NS', '$T', 0, 900002, 'new/PAY', 'aa', 'cc', 'absorbed', now())" >/dev/null
"$DEDUPCTL" purge -c "$WORK/ret.yaml" --dry-run >"$WORK/dry.out"
cat "$WORK/dry.out"
assert_eq "$(purge_count "$WORK/dry.out" "mismatches to delete:")" 1 "dry run: fingerprint mismatches to delete"
assert_eq "$(purge_count "$WORK/dry.out" "keys to delete:")" 60 "dry run: keys to delete"
assert_eq "$(purge_count "$WORK/dry.out" "progress_log to delete:")" "$progress" "dry run: progress_log rows to delete"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS'")" 62 "keys after the dry run"
"$DEDUPCTL" purge -c "$WORK/ret.yaml" >"$WORK/purge2.out"
cat "$WORK/purge2.out"
assert_eq "$(purge_count "$WORK/purge2.out" "keys deleted:")" 60 "expired DONE/FAILED keys deleted"
assert_eq "$(purge_count "$WORK/purge2.out" "progress_log deleted:")" "$progress" "progress_log rows older than the longest keep deleted"
assert_eq "$(purge_count "$WORK/purge2.out" "mismatches deleted:")" 1 "fingerprint mismatches older than the progress keep deleted"
assert_eq "$(sql "SELECT string_agg(idem_key, ',') FROM dedupd.mismatches WHERE namespace = '$NS'")" "new/PAY" "the mismatch left"
assert_eq "$(sql "SELECT string_agg(idem_key || ':' || status, ',' ORDER BY idem_key) FROM dedupd.keys WHERE namespace = '$NS'")" \
        "forever/PAY:DONE,stuck/PAY:PENDING" "what is left of the namespace"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = 'other-$ID'")" 1 "another namespace's expired key"

# Redelivered after its key was purged, a message is new again: that is what keep is for.
"$KT" produce -t "$T" <<<'{"order_id":"r-1","user_id":2,"amount":20}'
start d2 "$WORK/ret.yaml"
wait_done "$T"
stop d2
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS' AND idem_key = 'r-1/PAY'")" 1 "a purged key claimed again"
log "ok: purge takes responses, then exactly the expired keys; PENDING, keys without expiry and other namespaces stay"

# Two purges at once over 20,000 expired keys: both succeed, each key deleted once.
sql "INSERT INTO dedupd.keys (namespace, idem_key, status, response, created_at, expires_at)
     SELECT '$NS', 'bulk-' || g || '/PAY', (ARRAY['DONE','FAILED','EXPIRED'])[g % 3 + 1], 'r',
            now() - interval '1 day', now() - interval '1 hour' FROM generate_series(1, 20000) g;
     INSERT INTO dedupd.keys (namespace, idem_key, status, created_at, expires_at)
     SELECT '$NS', 'pend-' || g || '/PAY', 'PENDING', now() - interval '1 day', now() - interval '1 hour'
     FROM generate_series(1, 100) g"
before=$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS'")
rc1=0 rc2=0
"$DEDUPCTL" purge -c "$WORK/ret.yaml" --batch 200 >"$WORK/p1.out" 2>&1 &
p1=$!
"$DEDUPCTL" purge -c "$WORK/ret.yaml" --batch 200 >"$WORK/p2.out" 2>&1 &
p2=$!
wait $p1 || rc1=$?
wait $p2 || rc2=$?
cat "$WORK/p1.out" "$WORK/p2.out"
assert_eq "$rc1/$rc2" 0/0 "exit codes of two concurrent purges"
d1=$(purge_count "$WORK/p1.out" "keys deleted:")
d2=$(purge_count "$WORK/p2.out" "keys deleted:")
after=$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS'")
assert_eq "$((d1 + d2))" 20000 "keys deleted by both purges together ($d1 + $d2)"
assert_eq "$((before - after))" 20000 "rows gone from the table"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS' AND idem_key LIKE 'bulk-%'")" 0 "expired bulk keys left"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS' AND status = 'PENDING'")" 101 "PENDING keys left"
log "ok: concurrent purges split the work"

# The daemon purges every purge.interval_ms on its own.
sql "INSERT INTO dedupd.keys (namespace, idem_key, status, created_at, expires_at)
     SELECT '$NS', 'auto-' || g || '/PAY', 'DONE', now() - interval '1 day', now() - interval '1 hour'
     FROM generate_series(1, 1500) g"
SEED_ACCOUNTS=20 INITIAL_BALANCE=30 write_config "$WORK/auto.yaml" "$T" "$CLASS
purge:
  interval_ms: 1000
  batch: 500"
start d3 "$WORK/auto.yaml"
for ((i = 0; i < 200; i++)); do
        [[ $(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS' AND idem_key LIKE 'auto-%'") == 0 ]] && break
        sleep 0.1
done
stop d3
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS' AND idem_key LIKE 'auto-%'")" 0 "expired keys left by the daemon"
grep -q "purged [0-9]* expired key(s)" "$WORK/d3.log" || fail "the daemon logged no purge summary: $(grep retention "$WORK/d3.log")"
grep "purged [0-9]* expired key(s)" "$WORK/d3.log"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE namespace = '$NS' AND status = 'PENDING'")" 101 "PENDING keys left by the daemon"
log "ok: the daemon purges on its own"

# A class that keeps keys shorter than its topic keeps messages (the broker's default 7 days).
W="pay_ret_week_$$"
topic "$W" 1
write_config "$WORK/short.yaml" "$W" "    retention: notify
retention_classes:
  notify:
    keep: 1d
    max_retry: 1h"
rc=0
"$DEDUPCTL" check -c "$WORK/short.yaml" >"$WORK/short.out" 2>&1 || rc=$?
cat "$WORK/short.out"
assert_eq "$rc" 1 "check of a class shorter than its topic"
grep -q "short.yaml:[0-9]*:[0-9]*: topic $W: retention class 'notify' keeps keys 1d but the topic retains messages for 7d (retention.ms=604800000): .* 6d too short; set keep >= 7d or allow_shorter_than_topic: true" "$WORK/short.out" ||
        fail "check did not name 1d, 7d and the 6d difference"
rc=0
"$DEDUPD" -c "$WORK/short.yaml" >"$WORK/short.log" 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupd exit code with a class shorter than its topic"
grep -q "6d too short" "$WORK/short.log" || fail "dedupd did not say why: $(cat "$WORK/short.log")"
if grep -q "assigned" "$WORK/short.log"; then fail "joined the group despite the short class"; fi
sed 's/    max_retry: 1h/    max_retry: 1h\n    allow_shorter_than_topic: true/' "$WORK/short.yaml" >"$WORK/allowed.yaml"
"$DEDUPCTL" check -c "$WORK/allowed.yaml" >"$WORK/allowed.out" 2>&1 || fail "check with allow_shorter_than_topic: $(cat "$WORK/allowed.out")"
sed 's/keep: 1d/keep: 7d/' "$WORK/short.yaml" >"$WORK/week.yaml"
"$DEDUPCTL" check -c "$WORK/week.yaml" >"$WORK/week.out" 2>&1 || fail "check with keep = the topic's 7d: $(cat "$WORK/week.out")"
log "ok: a class shorter than its topic is refused, with the numbers"

# Key-design lint: warnings, exit 0.
write_config "$WORK/lint.yaml" "$T"
sed -i 's/subject: "{json:order_id}"/subject: "{json:user_id}"/; /action: PAY/d' "$WORK/lint.yaml"
"$DEDUPCTL" check -c "$WORK/lint.yaml" >"$WORK/lint.out" 2>&1 || fail "lint warnings made check fail: $(cat "$WORK/lint.out")"
cat "$WORK/lint.out"
grep -q "lint.yaml:[0-9]*:[0-9]*: warning: topic '$T': key has no action" "$WORK/lint.out" || fail "no warning for the missing action"
grep -q "lint.yaml:[0-9]*:[0-9]*: warning: topic '$T': key subject {json:user_id} is a bare user id: too coarse" "$WORK/lint.out" ||
        fail "no warning for the bare user id"
timeout 8 "$DEDUPD" -c "$WORK/lint.yaml" >"$WORK/lint.log" 2>&1 &
lp=$!
sleep 3
kill -TERM $lp 2>/dev/null || true
wait $lp || true
grep -q "lint.yaml:[0-9]*:[0-9]*: topic '$T': key subject {json:user_id} is a bare user id" "$WORK/lint.log" || fail "dedupd did not log the lint warning: $(head -5 "$WORK/lint.log")"
log "ok: key-design lint warns and does not refuse"

# plan: the seed's 10,000/s for 48 h. 20,000 rows like the daemon's exist: the row size is measured.
sql "TRUNCATE dedupd.keys;
     INSERT INTO dedupd.keys (namespace, idem_key, status, fingerprint, response, topic, partition, \"offset\",
                              expires_at, response_expires_at)
     SELECT '$NS', 'o-' || g || '/PAY', 'DONE', sha256(g::text::bytea), 'OK: debited 10', '$T', 0, g,
            now() + interval '2 days', now() + interval '1 day' FROM generate_series(1, 20000) g"
write_config "$WORK/plan.yaml" "$T" "    retention: payments
retention_classes:
  payments:
    keep: 48h
    max_retry: 30s
    clock_skew: 5m
    replay_window: 24h
    allow_shorter_than_topic: true"
"$DEDUPCTL" plan -c "$WORK/plan.yaml" --rate 10000/s >"$WORK/plan.out"
cat "$WORK/plan.out"
grep -q "1728000000 (1.73 billion)" "$WORK/plan.out" || fail "plan: not 1728000000 rows"
grep -q "row size: [0-9]* B, measured: pg_total_relation_size('dedupd.keys') = [0-9]* B ([0-9.]* MB) / 20000 rows counted" "$WORK/plan.out" ||
        fail "plan did not measure the row size"
row=$(sed -n 's/^row size: \([0-9]*\) B, measured.*/\1/p' "$WORK/plan.out")
[[ $row -ge 100 && $row -le 1000 ]] || fail "measured row size $row B is implausible"
log "ok: measured row size $row B (table + indexes)"
# both layouts' cost: heap deletes a day's keys, partitioned keeps keep + skew
# + a bucket (48h + 1d + 1d at 10,000/s) and drops a partition a day
grep -Eq "^payments +heap +1728000000 \(1.73 billion\) .* DELETE 864 million rows" "$WORK/plan.out" || fail "plan: no heap layout row"
grep -Eq "^payments +partitioned +3456000000 \(3.46 billion\) .* DROP TABLE one partition every 1d .* [0-9]+ partitions of dedupd.keys_p" \
        "$WORK/plan.out" || fail "plan: no partitioned layout row"
"$DEDUPCTL" plan -c "$WORK/plan.yaml" --rate 600000/min | grep -q "1728000000 (1.73 billion)" || fail "plan --rate 600000/min"
sql "TRUNCATE dedupd.keys"
"$DEDUPCTL" plan -c "$WORK/plan.yaml" --rate 10000 >"$WORK/plan2.out"
cat "$WORK/plan2.out"
grep -q "row size: 100 B, estimated" "$WORK/plan2.out" || fail "plan on an empty table did not use the estimate"
grep -q "1728000000 (1.73 billion) *172800000000 B (173 GB)" "$WORK/plan2.out" || fail "plan: not 173 GB at 100 B a row"
write_config "$WORK/forever.yaml" "$T"
"$DEDUPCTL" plan -c "$WORK/forever.yaml" --rate 10000/s >"$WORK/plan3.out"
cat "$WORK/plan3.out"
grep -q "keys are kept forever" "$WORK/plan3.out" || fail "plan without classes did not say forever"
grep -q "^-  *forever  *$T " "$WORK/plan3.out" || fail "plan without classes: no 'forever' row for the topic"
for bad in "" "--rate" "--rate fast" "--rate 10/d" "--rate 0"; do
        rc=0
        # shellcheck disable=SC2086
        "$DEDUPCTL" plan -c "$WORK/plan.yaml" $bad >"$WORK/badrate.out" 2>&1 || rc=$?
        assert_eq "$rc" 2 "plan exit code with '$bad'"
        grep -q "rate" "$WORK/badrate.out" || fail "plan '$bad': no clear message: $(cat "$WORK/badrate.out")"
done
log "ok: plan reproduces the seed's 1.73 billion rows / 173 GB"
