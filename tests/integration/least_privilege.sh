#!/usr/bin/env bash
# Least privilege (docs/operating.md: Database roles): `dedupctl migrate` runs as the
# owner of schema dedupd, `dedupctl grant` gives a role that owns nothing what
# dedupd needs, and dedupd runs as that role:
# 1. before the schema is migrated, the daemon role cannot start and is told
#    to run dedupctl migrate (one ERROR line, exit 1);
# 2. migrated and granted, it applies a payment workload exactly once
#    (rows and balances) and owns no table, schema or sequence;
# 3. a handler whose SQL tries DROP TABLE dedupd.keys or ALTER TABLE
#    dedupd.keys is refused by the database: the messages are dead-lettered
#    with the reason, the payments around them applied, the table unchanged.
. "$(dirname "$0")/lib.sh"

OWNER="dedupd_lp_owner_$$"
DAEMON="dedupd_lp_daemon_$$"
drop_roles() {
        psql "$PG_DSN" -X -q -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" >/dev/null 2>&1 || true
        psql "$PG_DSN" -X -q -c "DROP ROLE IF EXISTS \"$OWNER\"" -c "DROP ROLE IF EXISTS \"$DAEMON\"" >/dev/null 2>&1 || true
}
on_exit drop_roles

psql "$PG_DSN" -X -q -v ON_ERROR_STOP=1 -c "CREATE ROLE \"$OWNER\" LOGIN" -c "CREATE ROLE \"$DAEMON\" LOGIN" >/dev/null
# The owner may create schema dedupd in this database and the handler's
# tables in public (PostgreSQL 15 grants CREATE on public to nobody).
sql "GRANT CREATE ON DATABASE \"$DB\" TO \"$OWNER\"; GRANT CREATE ON SCHEMA public TO \"$OWNER\""
OWNER_DSN="$TEST_DSN user=$OWNER"
DAEMON_DSN="$TEST_DSN user=$DAEMON"

T="pay_lp_$$"
topic "$T" 2
SEED_ACCOUNTS=50 write_config "$WORK/owner.yaml" "$T"
sed -i "s#conninfo: \".*\"#conninfo: \"$OWNER_DSN\"#" "$WORK/owner.yaml"
sed "s#conninfo: \".*\"#conninfo: \"$DAEMON_DSN\"#" "$WORK/owner.yaml" >"$WORK/daemon.yaml"

# ---- 1. nothing migrated: the daemon role is told what to run -----------------
rc=0
timeout 60 "$DEDUPD" -c "$WORK/daemon.yaml" >"$WORK/unmigrated.log" 2>&1 || rc=$?
assert_eq "$rc" 1 "exit code of the daemon role on an unmigrated database"
assert_eq "$(grep -c ' ERROR ' "$WORK/unmigrated.log" || true)" 1 "ERROR lines"
err=$(grep ' ERROR ' "$WORK/unmigrated.log")
for w in "schema dedupd is at version 0 of" "permission denied for database" 'run `dedupctl migrate -c FILE` as the role that owns schema dedupd'; do
        [[ $err == *"$w"* ]] || fail "the ERROR line lacks '$w': $err"
done
assert_eq "$(sql "SELECT count(*) FROM pg_namespace WHERE nspname = 'dedupd'")" 0 "schemas the daemon role created"
log "ok: unmigrated: ${err#* ERROR  }"

# ---- 2. migrate as owner, grant, run as the daemon role -------------------------
"$DEDUPCTL" migrate -c "$WORK/owner.yaml" >"$WORK/migrate.out" 2>&1 || fail "migrate as owner: $(cat "$WORK/migrate.out")"
"$DEDUPCTL" grant -c "$WORK/owner.yaml" --role "$DAEMON" --table account --table transfer_ledger >"$WORK/grants.sql" ||
        fail "dedupctl grant: $(cat "$WORK/grants.sql")"
grep -qx "GRANT SELECT ON TABLE dedupd.schema_migrations TO $DAEMON;" "$WORK/grants.sql" || fail "grants: $(cat "$WORK/grants.sql")"
grep -qx "GRANT USAGE, SELECT ON SEQUENCE dedupd.outbox_id_seq TO $DAEMON;" "$WORK/grants.sql" || fail "grants: $(cat "$WORK/grants.sql")"
assert_eq "$(sql "SELECT has_table_privilege('$DAEMON', 'dedupd.keys', 'INSERT')")" f "INSERT on dedupd.keys before --apply"
"$DEDUPCTL" grant -c "$WORK/owner.yaml" --role "$DAEMON" --table account --table transfer_ledger --apply >"$WORK/apply.out" ||
        fail "dedupctl grant --apply: $(cat "$WORK/apply.out")"
grep -q "^applied $(wc -l <"$WORK/grants.sql") statements$" "$WORK/apply.out" || fail "apply: $(cat "$WORK/apply.out")"
# A role name that needs quoting is quoted by the server, not pasted.
out=$("$DEDUPCTL" grant -c "$WORK/owner.yaml" --role 'x"; DROP TABLE dedupd.keys; --')
[[ $out == *'TO "x""; DROP TABLE dedupd.keys; --";'* ]] || fail "a role name is not quoted: $out"

workload "$WORK/w.txt" "$WORK/keys.txt" 3000 2000
"$KT" produce -t "$T" <"$WORK/w.txt"
start daemon "$WORK/daemon.yaml"
wait_done "$T" 120
stop daemon
check_invariants "$WORK/keys.txt"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" "$(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'DONE'")" "ledger rows = DONE keys"
grep -q "applied schema migration" "$WORK/daemon.log" && fail "the daemon role migrated something"
assert_eq "$(sql "SELECT count(*) FROM pg_class WHERE relowner = '$DAEMON'::regrole")" 0 "relations the daemon role owns"
assert_eq "$(sql "SELECT count(*) FROM pg_namespace WHERE nspowner = '$DAEMON'::regrole")" 0 "schemas the daemon role owns"
out=$(psql "$DAEMON_DSN" -X -q -c "DROP TABLE dedupd.keys" 2>&1 || true)
[[ $out == *"must be owner of table keys"* ]] || fail "the daemon role could DROP dedupd.keys: $out"
log "ok: the daemon role applied $(sql "SELECT count(*) FROM dedupd.keys") keys exactly once, owns nothing, cannot drop dedupd.keys"

# ---- 3. a handler that tries DDL on the dedup tables ----------------------------
# The owner's function runs as its caller (SECURITY INVOKER, the default):
# whatever the statement does, it does with the daemon role's rights.
psql "$OWNER_DSN" -X -q -v ON_ERROR_STOP=1 -c "CREATE FUNCTION ddl_attempt(what text, key text) RETURNS text LANGUAGE plpgsql AS \$f\$
BEGIN
  IF what = 'drop' THEN EXECUTE 'DROP TABLE dedupd.keys';
  ELSIF what = 'alter' THEN EXECUTE 'ALTER TABLE dedupd.keys ADD COLUMN evil int';
  END IF;
  INSERT INTO transfer_ledger (idem_key, user_id, amount) VALUES (key, 1, 0);
  RETURN 'OK: ' || what;
END \$f\$" >/dev/null
T2="ddl_lp_$$"
topic "$T2" 1
{
        for i in $(seq 1 10); do echo "{\"order_id\":\"n-$i\",\"what\":\"none\"}"; done
        echo '{"order_id":"evil-drop","what":"drop"}'
        echo '{"order_id":"evil-alter","what":"alter"}'
        for i in $(seq 11 20); do echo "{\"order_id\":\"n-$i\",\"what\":\"none\"}"; done
} | "$KT" produce -t "$T2"
sed -e "s#^  - name: $T\$#  - name: $T2#" -e "s#group.id: \"grp-$ID\"#group.id: \"grp-$ID-ddl\"#" \
        -e 's/^      backoff_max_ms: 500/      backoff_max_ms: 100\n      max_attempts: 2/' "$WORK/daemon.yaml" |
        awk -v so="$BUILD/sql.so" '
                /^    handler:/ { print; print "      path: \"" so "\""; print "      config:";
                        print "        statement: \"SELECT ddl_attempt({json:what}, {idem_key})\""; skip = 1; next }
                skip && /^    [a-z]/ { skip = 0 }
                !skip { print }' >"$WORK/ddl.yaml"
start ddl "$WORK/ddl.yaml"
wait_done "$T2" 120
stop ddl
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key LIKE 'n-%'")" 20 "statements without DDL applied around the DDL ones"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE idem_key LIKE 'evil-%'")" 0 "effects of the DDL statements"
"$KT" dump -t "$T2.dlq" >"$WORK/dlq.txt"
assert_eq "$(grep -c '^  dedupd.reason=' "$WORK/dlq.txt")" 2 "dead letters"
grep -q 'evil-drop' "$WORK/dlq.txt" && grep -q 'evil-alter' "$WORK/dlq.txt" || fail "dead letters: $(cat "$WORK/dlq.txt")"
grep -q 'must be owner of table keys' "$WORK/ddl.log" || fail "the refusal is not reported: $(grep -i error "$WORK/ddl.log" | tail -3)"
assert_eq "$(sql "SELECT to_regclass('dedupd.keys') IS NOT NULL")" t "dedupd.keys still exists"
assert_eq "$(sql "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'dedupd' AND table_name = 'keys' AND column_name = 'evil'")" 0 "columns the handler added"
out=$("$DEDUPCTL" migrate -c "$WORK/owner.yaml" 2>&1) || fail "schema check after the run: $out"
[[ $out == *"as described"* ]] || fail "schema dedupd changed: $out"
log "ok: DROP TABLE and ALTER TABLE from the handler refused by the database, dead-lettered, schema dedupd as described"

# ---- 4. keys.layout: partitioned as the daemon role ------------------------------
# It makes its buckets' partitions (and purge drops them) through dedupd's own
# SECURITY DEFINER functions: the daemon role still owns none of them.
TP="pay_lp_part_$$"
topic "$TP" 1
SEED_ACCOUNTS=60 write_config "$WORK/part.yaml" "$TP" "    retention: short
keys: {layout: partitioned}
retention_classes:
  short: {keep: 1d, allow_shorter_than_topic: true}"
sed -i "s#conninfo: \".*\"#conninfo: \"$DAEMON_DSN\"#; s#^namespace: .*#namespace: it-$ID-part#; s#grp-$ID#grp-$ID-part#" "$WORK/part.yaml"
# accounts 51 to 60: new, the workload has not spent them
for i in 51 52 53 51 52; do printf 'u%d\t{"order_id":"p-%d","user_id":%d,"amount":1}\n' "$i" "$i" "$i"; done | "$KT" produce -t "$TP"
start part "$WORK/part.yaml"
wait_done "$TP" 120
stop part
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys_p WHERE namespace = 'it-$ID-part'")" 3 "keys in dedupd.keys_p"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys_p WHERE namespace = 'it-$ID-part' AND status = 'DONE'")" 3 "DONE keys"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger WHERE user_id > 50")" 3 "one effect per order"
assert_eq "$(sql "SELECT count(*) FROM dedupd.key_partitions WHERE namespace = 'it-$ID-part'")" 5 \
        "partitions made by the daemon role (keep + skew back, skew and one bucket ahead)"
assert_eq "$(sql "SELECT count(*) FROM pg_class WHERE relowner = '$DAEMON'::regrole")" 0 "relations the daemon role owns"
"$DEDUPCTL" purge -c "$WORK/part.yaml" >"$WORK/part-purge.out" 2>&1 || fail "purge as the daemon role: $(cat "$WORK/part-purge.out")"
log "ok: partitioned layout as the daemon role: $(sql "SELECT count(*) FROM dedupd.key_partitions WHERE namespace = 'it-$ID-part'") partitions, none its own"
