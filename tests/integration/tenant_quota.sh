#!/usr/bin/env bash
# Tenants (issue 21 §2): tenant.key takes whose message it is from a header
# and puts it before the key, so acme's o-1 and big's o-1 are two keys. acme
# may hold 5 live keys (tenant.quota): of its 8 new orders the first 5 apply,
# the other 3 are dead-lettered with the reason while its copies of o-1 and
# o-2 are absorbed as ever; big has no quota (tenant.quotas: 0) and all its 10
# apply; small may hold 2, and its third order and that order's copy in the
# same batch are dead-lettered. A message with no tenant, or one that is not
# a tenant name, is dead-lettered. dedupd.tenant_usage counts each tenant's
# live keys (expired ones too, until they are deleted); dedupctl rerun gives one back (acme's next order applies), and
# purge gives back what it deletes. dedupd_tenant_messages_total labels the
# first 2 tenants (tenant.metrics_top) and counts small as other.
. "$(dirname "$0")/lib.sh"

T="tenants_$$"
topic "$T" 1
export SEED_ACCOUNTS=50 INITIAL_BALANCE=1000
tenant_config() {
        write_config "$1" "$T" "    tenant: {key: \"{header:tenant-id}\", quota: 5, quotas: {big: 0, small: 2}, metrics_top: 2,
             retention: {big: ${2:-long}}}
    retention: short
retention_classes:
  short: {keep: 3s, allow_shorter_than_topic: true}
  long: {keep: 1h, allow_shorter_than_topic: true}
  shorter: {keep: 1s, allow_shorter_than_topic: true}
http: {listen: \"127.0.0.1:0\"}"
}
tenant_config "$WORK/c.yaml"
tenant_config "$WORK/bad.yaml" shorter
RC=0; "$DEDUPCTL" check --offline -c "$WORK/bad.yaml" >"$WORK/bad.out" 2>&1 || RC=$?
assert_eq "$RC" 1 "check of a tenant class shorter than the topic's"
grep -q "tenant.retention.big: class 'shorter' keeps keys shorter than the topic's class 'short'" "$WORK/bad.out" || fail "check: $(cat "$WORK/bad.out")"
order() { printf 'u%d\t{"order_id":"o-%d","user_id":%d,"amount":1}\n' "$1" "$1" "$1"; }
{ for i in $(seq 1 8); do order "$i"; done; order 1; order 2; } | "$KT" produce -t "$T" -H tenant-id=acme
for i in $(seq 1 10); do order "$i"; done | "$KT" produce -t "$T" -H tenant-id=big
{ order 1; order 2; order 3; order 3; } | "$KT" produce -t "$T" -H tenant-id=small
order 40 | "$KT" produce -t "$T"
order 41 | "$KT" produce -t "$T" -H "tenant-id=not a name"

start d1 "$WORK/c.yaml"
wait_done "$T"
keys_of() { sql "SELECT count(*) FROM dedupd.keys WHERE idem_key LIKE '$1:%'"; }
live_of() { sql "SELECT coalesce(sum(live), 0) FROM dedupd.tenant_usage WHERE tenant = '$1' AND topic = '$T'"; }
assert_eq "$(keys_of acme)/$(keys_of big)/$(keys_of small)" "5/10/2" "keys of acme/big/small"
assert_eq "$(live_of acme)/$(live_of big)/$(live_of small)" "5/10/2" "tenant_usage of acme/big/small"
assert_eq "$(sql "SELECT string_agg(idem_key, ' ' ORDER BY idem_key) FROM dedupd.keys WHERE idem_key LIKE 'acme:%'")" \
        "acme:o-1/PAY acme:o-2/PAY acme:o-3/PAY acme:o-4/PAY acme:o-5/PAY" "acme's first five orders applied"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key IN ('acme:o-1/PAY', 'big:o-1/PAY')")" 2 \
        "acme's o-1 and big's o-1 are two keys, one effect each"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 17 "effects: 5 + 10 + 2"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE idem_key LIKE 'big:%' AND expires_at > now() + interval '50 minutes'")" 10 \
        "big's keys expire by its own class (1h)"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE idem_key NOT LIKE 'big:%' AND expires_at < now() + interval '1 minute'")" 7 \
        "the other tenants' keys by the topic's (3s)"
"$KT" dump -t "$T.dlq" >"$WORK/dlq.txt"
assert_eq "$(grep -c "dedupd.reason=tenant acme holds its quota of 5 live keys" "$WORK/dlq.txt")" 3 "acme's refused orders dead-lettered"
assert_eq "$(grep -c "dedupd.reason=tenant small holds its quota of 2 live keys" "$WORK/dlq.txt")" 2 "small's third order and its copy"
grep -q "dedupd.reason=tenant: " "$WORK/dlq.txt" || fail "no dead letter for the message without a tenant: $(cat "$WORK/dlq.txt")"
grep -q "dedupd.reason=tenant: 'not a name' is not a tenant name" "$WORK/dlq.txt" || fail "no dead letter for the bad tenant name"
assert_eq "$(grep -c "dedupd.reason=" "$WORK/dlq.txt")" 7 "dead letters in all"
ADDR=$(metrics_addr d1)
metric() { curl -s "http://$ADDR/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
assert_eq "$(metric "dedupd_tenant_quota_refused_total{topic=\"$T\",tenant=\"acme\"}")" 3 "metric: acme's refusals"
assert_eq "$(metric "dedupd_tenant_messages_total{topic=\"$T\",tenant=\"acme\",outcome=\"duplicate\"}")" 2 "metric: acme's duplicates"
assert_eq "$(metric "dedupd_tenant_messages_total{topic=\"$T\",tenant=\"big\",outcome=\"applied\"}")" 10 "metric: big's applied"
assert_eq "$(metric "dedupd_tenant_messages_total{topic=\"$T\",tenant=\"other\",outcome=\"applied\"}")" 2 "metric: small counted as other"
assert_eq "$(metric "dedupd_tenant_quota_refused_total{topic=\"$T\",tenant=\"other\"}")" 2 "metric: small's refusals under other"
assert_eq "$(metric "dedupd_tenant_messages_total{topic=\"$T\",tenant=\"none\",outcome=\"dead_lettered\"}")" 2 "metric: messages without a tenant"
stop d1
"$DEDUPCTL" stats -c "$WORK/c.yaml" >"$WORK/stats.out"
grep -Eq "^$T *\| *big *\| *10$" "$WORK/stats.out" || fail "stats does not show big's live keys: $(cat "$WORK/stats.out")"

# a re-run gives acme one key back: its next new order applies, the one after is refused
"$DEDUPCTL" rerun -c "$WORK/c.yaml" acme:o-5/PAY --reason "tenant test" >/dev/null
assert_eq "$(live_of acme)" 4 "tenant_usage of acme after a re-run deleted one key"
{ order 9; order 10; } | "$KT" produce -t "$T" -H tenant-id=acme
start d2 "$WORK/c.yaml"
wait_done "$T"
stop d2
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE idem_key IN ('acme:o-9/PAY', 'acme:o-10/PAY')")" 1 "one more acme order applied"
assert_eq "$(live_of acme)" 5 "tenant_usage of acme at its quota again"

# purge gives back what it deletes (the keys expire 3 s after their claim; expired, they still count
# until they are deleted)
sleep 3
"$DEDUPCTL" purge -c "$WORK/c.yaml" >"$WORK/purge.out" || fail "purge: $(cat "$WORK/purge.out")"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" 10 "every key purged but big's (kept 1h)"
assert_eq "$(live_of acme)/$(live_of big)/$(live_of small)" "0/10/0" "tenant_usage after the purge"
