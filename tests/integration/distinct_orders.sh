#!/usr/bin/env bash
# The seed's scenario 2: 100 different orders -> 100 effects. The key is the contract.
. "$(dirname "$0")/lib.sh"

T="pay_distinct_$$"
topic "$T" 3
write_config "$WORK/c.yaml" "$T"
for i in $(seq 1 100); do
        printf '{"order_id":"o-%d","user_id":2,"amount":10}\n' "$i"
done | "$KT" produce -t "$T"

start d1 "$WORK/c.yaml"
wait_done "$T"
stop d1

assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 100 "ledger rows"
assert_eq "$(sql "SELECT count(DISTINCT idem_key) FROM transfer_ledger")" 100 "distinct keys with an effect"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 2")" 0 "balance of user 2"
assert_eq "$(kafka_lag "$T")" 0 "Kafka consumer lag"
