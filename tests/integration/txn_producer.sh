#!/usr/bin/env bash
# A topic written by a transactional producer: commits and aborts, the last
# transaction aborted, orders repeated across transactions. Every committed
# order is applied once, no aborted one at all; and once dedupd has consumed
# everything, dedupd.offsets is at the high watermark of every partition, the
# group's Kafka lag is 0 and `dedupctl verify --expect-caught-up` exits 0 —
# although the markers and the aborted records that fill those offsets were
# never delivered to dedupd.
. "$(dirname "$0")/lib.sh"

T="pay_txn_$$"
topic "$T" 3
write_config "$WORK/c.yaml" "$T"

# 30 transactions of orders keyed by order id (a repeat lands on its order's
# partition): two committed (40 new orders, 10 repeats of earlier ones, same
# payload) then one aborted (40 orders of their own), ten times over.
awk 'function order(id) { printf "%s\t{\"order_id\":\"%s\",\"user_id\":%d,\"amount\":%d}\n", id, id, n % 50 + 1, (n % 7 + 1) * 10 }
     BEGIN {
        srand(20261130)
        for (t = 1; t <= 30; t++) {
                if (t % 3 == 0) {
                        for (i = 0; i < 40; i++) { n = ++x; order("x-" n) }
                        print "#abort"
                        continue
                }
                for (i = 0; i < 40; i++) { n = ++c; order("o-" n) }
                for (i = 0; i < 10; i++) { n = int(rand() * c) + 1; order("o-" n) }
                print "#commit"
        }
}' >"$WORK/txns.txt"
seq 1 800 | sed 's#^#o-#; s#$#/PAY#' >"$WORK/keys.txt"
assert_eq "$("$KT" txn -t "$T" -i "txn-$ID" <"$WORK/txns.txt")" "committed 1000 aborted 400" "messages produced"

start d1 "$WORK/c.yaml"
for ((i = 0; i < 300; i++)); do
        (($(sql "SELECT count(*) FROM dedupd.keys" 2>/dev/null || echo 0) >= 800)) && break
        sleep 0.1
done

# Every partition's position at its high watermark (the markers and the last,
# aborted, transaction behind the last message delivered), in the database
# and in Kafka.
at_high() {
        sql "SELECT partition, next_offset FROM dedupd.offsets WHERE topic = '$T' ORDER BY 1" >"$WORK/db.txt"
        tr '|' ' ' <"$WORK/db.txt" | diff -q - "$WORK/high.txt" >/dev/null && [[ $(kafka_lag "$T") == 0 ]]
}
# caught_up WHEN: dedupd.offsets and Kafka's committed offsets at the high watermarks
caught_up() {
        "$KT" offsets -t "$T" | awk '$1 != "total" {print $1, $3}' | sort >"$WORK/high.txt"
        for ((i = 0; i < 100; i++)); do
                at_high && break
                sleep 0.1
        done
        log "high watermarks: $(tr '\n' ' ' <"$WORK/high.txt")"
        log "dedupd.offsets:  $(tr '|\n' '  ' <"$WORK/db.txt")"
        assert_eq "$(tr '|\n' '  ' <"$WORK/db.txt")" "$(tr '\n' ' ' <"$WORK/high.txt")" "dedupd.offsets per partition $1"
        assert_eq "$(kafka_lag "$T")" 0 "Kafka consumer lag $1"
}
caught_up "after the run"

rc=0
"$DEDUPCTL" verify -c "$WORK/c.yaml" --expect-caught-up >"$WORK/verify.out" 2>&1 || rc=$?
cat "$WORK/verify.out"
assert_eq "$rc" 0 "verify --expect-caught-up exits"
stop d1

# Restarted with nothing but an aborted transaction beyond its position: no
# message arrives, and the position moves from where the database had it
# when the partitions were assigned.
awk 'BEGIN { for (n = 401; n <= 430; n++) printf "x-%d\t{\"order_id\":\"x-%d\",\"user_id\":1,\"amount\":10}\n", n, n; print "#abort" }' |
        "$KT" txn -t "$T" -i "txn-$ID" >/dev/null
start d2 "$WORK/c.yaml"
caught_up "after a restart behind an aborted transaction"
stop d2

check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE idem_key LIKE 'x-%'")" 0 "aborted orders with a record"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key LIKE 'x-%'")" 0 "aborted orders applied"
assert_eq "$(sql "SELECT sum(consumed) FROM dedupd.offsets WHERE topic = '$T'")" 1000 "messages consumed"
assert_eq "$(sql "SELECT sum(duplicates) FROM dedupd.offsets WHERE topic = '$T'")" 200 "repeats absorbed"
