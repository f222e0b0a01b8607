#!/usr/bin/env bash
# What an operator meets first: --help, config errors with file:line:column,
# a bad handler refused before joining the group, inspect and stats.
. "$(dirname "$0")/lib.sh"

"$DEDUPD" --help | grep -q "Usage: dedupd -c FILE" || fail "dedupd --help"
# Read whole: grep -q on a pipe would stop reading at its match and SIGPIPE a
# help longer than one write.
grep -q "inspect" <<<"$("$DEDUPCTL" --help)" || fail "dedupctl --help"
grep -q "outbox  retry -c FILE (ID... | --all)" <<<"$("$DEDUPCTL" --help)" || fail "dedupctl --help lists no outbox"
# One command's help, from the same table: its forms, what it does, its options.
"$DEDUPCTL" help replay >"$WORK/help-replay" || fail "dedupctl help replay exited $?"
grep -q "^Usage: dedupctl replay  -c FILE -t TOPIC --reproduce" "$WORK/help-replay" || fail "help replay: $(cat "$WORK/help-replay")"
grep -q "^  --to-offset N " "$WORK/help-replay" || fail "help replay lists no --to-offset"
grep -q "^  --batch" "$WORK/help-replay" && fail "help replay lists purge's --batch"
"$DEDUPCTL" check --help | grep -q "^  --offline " || fail "dedupctl check --help lists no --offline"
rc=0; "$DEDUPCTL" help no-such-command >/dev/null 2>"$WORK/help-bad" || rc=$?
assert_eq "$rc" 2 "dedupctl help of an unknown command exits"
grep -q "no such command" "$WORK/help-bad" || fail "help no-such-command: $(cat "$WORK/help-bad")"
rc=0; "$DEDUPD" >/dev/null 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupd without -c exits"

# --version: the libraries it runs with, as their own tools name them, and the
# ABI of the header handlers are built against.
abi=$(sed -n 's/^#define DEDUPD_HANDLER_ABI_MAJOR \([0-9]*\)$/\1/p' "$ROOT/include/dedupd/handler.h")
for prog in dedupd dedupctl; do
        "$BUILD/$prog" --version >"$WORK/$prog.version" || fail "$prog --version exited $?"
        assert_eq "$(sed -n 1p "$WORK/$prog.version")" "$prog $(sed -n 's/^project(dedupd VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt") (handler ABI $abi)" "$prog --version, line 1"
        assert_eq "$(sed -n 2p "$WORK/$prog.version")" "librdkafka $(pkg-config --modversion rdkafka), librabbitmq $(pkg-config --modversion librabbitmq), nats.c $(pkg-config --modversion libnats)" "$prog --version, line 2 (the brokers' client libraries)"
        assert_eq "$(sed -n 3p "$WORK/$prog.version")" "libpq $(pkg-config --modversion libpq)" "$prog --version, line 3"
        grep -q '^fault points: ' "$WORK/$prog.version" || fail "$prog --version does not say whether fault points are in"
        grep -q -- "-V, --version" <<<"$("$BUILD/$prog" --help)" || fail "$prog --help does not list --version"
done

T="pay_cli_$$"
topic "$T" 1
write_config "$WORK/good.yaml" "$T"
"$DEDUPCTL" check -c "$WORK/good.yaml" >"$WORK/check.out" || fail "check of a good config failed: $(cat "$WORK/check.out")"
grep -q "OK" "$WORK/check.out" || fail "check printed no OK"
DEDUPD_HANDLER_DIR="$BUILD" KAFKA_BOOTSTRAP=x PG_DSN=y "$DEDUPCTL" check --offline -c "$ROOT/config/transfer.yaml" >/dev/null ||
        fail "the shipped config/transfer.yaml does not pass check"
log "ok: good configs pass check"

# --env-file: the unit's EnvironmentFile= (systemd syntax) set before ${VAR}
# expands, so check sees what dedupd under systemd sees.
sed "s|^  conninfo: .*|  conninfo: \"\${DEDUPD_IT_CONNINFO}\"|" "$WORK/good.yaml" >"$WORK/env.yaml"
grep -q 'conninfo: "${DEDUPD_IT_CONNINFO}"' "$WORK/env.yaml" || fail "env.yaml: $(cat "$WORK/env.yaml")"
printf '# the unit'"'"'s secrets\n\nDEDUPD_IT_CONNINFO="%s"\nnot a line\n' "$TEST_DSN" >"$WORK/environment"
rc=0; env -u DEDUPD_IT_CONNINFO "$DEDUPCTL" check -c "$WORK/env.yaml" >/dev/null 2>"$WORK/noenv.err" || rc=$?
assert_eq "$rc" 1 "check of a \${VAR} config without the unit's environment exits"
grep -q "environment variable DEDUPD_IT_CONNINFO is not set" "$WORK/noenv.err" || fail "check says: $(cat "$WORK/noenv.err")"
env -u DEDUPD_IT_CONNINFO "$DEDUPCTL" check --env-file "$WORK/environment" -c "$WORK/env.yaml" >"$WORK/env.out" 2>"$WORK/env.err" ||
        fail "check --env-file: $(cat "$WORK/env.out" "$WORK/env.err")"
grep -q "^database .*: connected" "$WORK/env.out" || fail "check --env-file did not reach the database: $(cat "$WORK/env.out")"
grep -q "environment:4: warning: no '=' after 'not a line': systemd skips this line" "$WORK/env.err" || fail "check --env-file warns: $(cat "$WORK/env.err")"
rc=0; "$DEDUPCTL" check --env-file "$WORK/no-such-file" -c "$WORK/env.yaml" >/dev/null 2>"$WORK/env-missing.err" || rc=$?
assert_eq "$rc" 2 "check --env-file of a missing file exits"
rc=0; "$DEDUPCTL" verify --env-file "$WORK/environment" -c "$WORK/env.yaml" >/dev/null 2>&1 || rc=$?
assert_eq "$rc" 2 "--env-file on another command than check exits"
log "ok: check --env-file reads the unit's environment as systemd does"

# Every problem at once, each with file:line:column.
cat >"$WORK/bad.yaml" <<'YAML'
namespace: shop
postgres:
  conninfo: "${DEDUPD_SURELY_UNSET_VAR}"
kafka:
  bootstrap.servers: localhost:9092
  group.id: g
  session.timeout.ms: soon
topics:
  - name: orders
    key:
      subject: "{offset}"
      action: PAY
    handler:
      path: /nonexistent/handler.so
    batch:
      max_messages: 0
    colour: blue
YAML
rc=0
"$DEDUPCTL" check -c "$WORK/bad.yaml" >"$WORK/bad.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "dedupctl check exit code on a bad config"
cat "$WORK/bad.out"
for want in "bad.yaml:3:13: 'postgres.conninfo': environment variable DEDUPD_SURELY_UNSET_VAR is not set" \
        "bad.yaml:7:23: kafka.session.timeout.ms:" \
        "bad.yaml:11:16: 'topics\[0\].key.subject': {offset} is refused" \
        "bad.yaml:16:21: 'topics\[0\].batch.max_messages': 0 is out of range" \
        "bad.yaml:17:5: unknown key 'topics\[0\].colour'"; do
        grep -q "$want" "$WORK/bad.out" || fail "check output lacks: $want"
done
log "ok: every config error reported with file:line:column"

# Configs with holes: a value present but null or empty where one is required. Each is refused
# by check (exit 1, the config-error code) and by dedupd (exit 2) with file:line:column, before
# any broker or database call: the test database never gets a schema. (A topic name with nothing
# after it used to reach DescribeConfigs and crash dedupctl check with SIGSEGV.)
# Each case: SED-EXPRESSION|LINE-PATTERN|COLUMN|MESSAGE (LINE-PATTERN finds the line in good.yaml).
for c in "s/^  - name: .*/  - name:/|^  - name:|10|'topics\[0\].name' is required but has no value" \
        "s/^      subject: .*/      subject:/|^      subject:|15|'topics\[0\].key.subject' is required but has no value" \
        "s#^      path: .*#      path: ~#|^      path:|13|'topics\[0\].handler.path' is required but has no value" \
        "s#^  conninfo: .*#  conninfo: \"\"#|^  conninfo:|13|'postgres.conninfo' is empty: a value is required" \
        "s/^  bootstrap.servers: .*/  bootstrap.servers:/|^  bootstrap.servers:|21|'kafka.bootstrap.servers' is required but has no value" \
        "/^      subject: /d;/^      action: /d|^    key:|9|'topics\[0\].key' is required but has no value"; do
        IFS='|' read -r expr pat col want <<<"$c"
        line=$(grep -n -m1 -- "$pat" "$WORK/good.yaml" | cut -d: -f1)
        sed "$expr" "$WORK/good.yaml" >"$WORK/hole.yaml"
        ! cmp -s "$WORK/good.yaml" "$WORK/hole.yaml" || fail "the hole was not made: $expr"
        rc=0
        timeout 60 "$DEDUPCTL" check -c "$WORK/hole.yaml" >"$WORK/hole.out" 2>&1 || rc=$?
        assert_eq "$rc" 1 "dedupctl check exit code with $expr"
        grep -q "^$WORK/hole.yaml:$line:$col: $want" "$WORK/hole.out" ||
                fail "check of $expr: expected '$WORK/hole.yaml:$line:$col: $want', got: $(cat "$WORK/hole.out")"
        rc=0
        timeout 60 "$DEDUPD" -c "$WORK/hole.yaml" >"$WORK/hole.log" 2>&1 || rc=$?
        assert_eq "$rc" 2 "dedupd exit code with $expr"
        grep -q "$WORK/hole.yaml:$line:$col: $want" "$WORK/hole.log" || fail "dedupd with $expr: $(cat "$WORK/hole.log")"
done
assert_eq "$(sql "SELECT count(*) FROM pg_namespace WHERE nspname = 'dedupd'")" 0 "dedupd schemas the configs with holes created"
log "ok: configs with holes refused at file:line:column before any broker or database call"

# A handler that cannot be loaded: refused before the consumer joins the group.
sed "s#path: \".*transfer.so\"#path: \"$WORK/missing.so\"#" "$WORK/good.yaml" >"$WORK/nohandler.yaml"
rc=0
"$DEDUPD" -c "$WORK/nohandler.yaml" >"$WORK/nohandler.log" 2>&1 || rc=$?
assert_eq "$rc" 2 "dedupd exit code with a missing handler"
grep -q "missing.so: cannot load" "$WORK/nohandler.log" || fail "no clear error for the missing handler"
if grep -q "assigned" "$WORK/nohandler.log"; then fail "joined the group despite a bad handler"; fi
for fx in "$BUILD"/tests/unit/fixture_wrong_abi.so "$BUILD"/tests/unit/wrong_abi.so; do
        [[ -f $fx ]] || continue
        sed "s#path: \".*transfer.so\"#path: \"$fx\"#" "$WORK/good.yaml" >"$WORK/abi.yaml"
        rc=0
        "$DEDUPCTL" check -c "$WORK/abi.yaml" >"$WORK/abi.out" 2>&1 || rc=$?
        assert_eq "$rc" 1 "dedupctl check exit code with a wrong-ABI handler"
        grep -q "ABI major version" "$WORK/abi.out" || fail "wrong ABI not named: $(cat "$WORK/abi.out")"
done
log "ok: bad handlers refused with the reason"

# inspect and stats after a real run
printf '%s\n' '{"order_id":"77","user_id":5,"amount":10}' '{"order_id":"77","user_id":5,"amount":10}' | "$KT" produce -t "$T"
start d1 "$WORK/good.yaml"
wait_done "$T"
stop d1
"$DEDUPCTL" inspect -c "$WORK/good.yaml" 77/PAY >"$WORK/inspect.out"
grep -q "^status *DONE" "$WORK/inspect.out" || fail "inspect: $(cat "$WORK/inspect.out")"
grep -q "^response *OK: debited 10" "$WORK/inspect.out" || fail "inspect shows no response"
rc=0; "$DEDUPCTL" inspect -c "$WORK/good.yaml" nope/PAY >/dev/null 2>&1 || rc=$?
assert_eq "$rc" 1 "inspect of an unknown key exits"
"$DEDUPCTL" stats -c "$WORK/good.yaml" >"$WORK/stats.out"
grep -q "DONE *| *1" "$WORK/stats.out" || fail "stats: $(cat "$WORK/stats.out")"
log "ok: inspect and stats"

# The migrated schema is the one described in src/pg/schema.c, column by column.
sql "DROP TABLE account, transfer_ledger"
"$DEDUPCTL" migrate -c "$WORK/good.yaml" >"$WORK/migrate.out" || fail "migrate: $(cat "$WORK/migrate.out")"
grep -q "^schema dedupd: 154 columns in 16 tables, as described" "$WORK/migrate.out" || fail "migrate says: $(cat "$WORK/migrate.out")"
# ... and the handler's own tables exist before any dedupd ran: its init() ran too.
grep -q "^topic $T: handler transfer set up" "$WORK/migrate.out" || fail "migrate says: $(cat "$WORK/migrate.out")"
assert_eq "$(sql "SELECT count(*) FROM account")" "${SEED_ACCOUNTS:-100}" "accounts seeded by dedupctl migrate"
sql "ALTER TABLE dedupd.keys ADD COLUMN note text"
rc=0; "$DEDUPCTL" migrate -c "$WORK/good.yaml" >"$WORK/migrate2.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "migrate exit code with a column the description lacks"
grep -q "differs from its description in 1 place: not described dedupd.keys.note" "$WORK/migrate2.out" || fail "migrate says: $(cat "$WORK/migrate2.out")"
sql "ALTER TABLE dedupd.keys DROP COLUMN note"
log "ok: the migrated schema matches its description, and a drift is named"

# Secrets never reach a log: a password in the conninfo of an unreachable database.
sed "s#conninfo: \".*\"#conninfo: \"host=127.0.0.1 port=1 dbname=x user=u password=S3cretXYZ\"#" "$WORK/good.yaml" >"$WORK/secret.yaml"
start s1 "$WORK/secret.yaml"
sleep 1.5
stop s1
grep -q "database unavailable" "$WORK/s1.log" || fail "the unreachable database was not reported"
if grep -q "S3cretXYZ" "$WORK/s1.log"; then fail "the password reached the log"; fi
log "ok: the password is not in the log"

# Hostile configs are answered at once, each with the bound that refused it
# (libyaml alone took a minute on 100,000 unterminated '[').
python3 - "$WORK" <<'PY'
import sys
w = sys.argv[1]
open(f"{w}/h_seq.yaml", "w").write("a: " + "[" * 100000 + "]" * 100000 + "\n")
open(f"{w}/h_open.yaml", "w").write("a: " + "[" * 100000 + "\n")
open(f"{w}/h_maps.yaml", "w").write("a: " + "{a: " * 50000 + "}" * 50000 + "\n")
open(f"{w}/h_big.yaml", "w").write("namespace: \"" + "x" * 10_000_000 + "\"\n")
t = "{json:a}" * 120000
open(f"{w}/h_tmpl.yaml", "w").write("namespace: s\npostgres: {conninfo: x}\nkafka: {bootstrap.servers: b, group.id: g}\n"
    f"topics:\n  - name: t\n    key: {{subject: \"{t}\", action: PAY}}\n    handler: {{path: h.so}}\n")
PY
for c in "h_seq:nested deeper than 32 levels" "h_open:nested deeper than 32 levels" \
        "h_maps:nested deeper than 32 levels" "h_big:the file is 10000014 bytes; a configuration may be at most 1048576 bytes" \
        "h_tmpl:key template is 960000 bytes; at most 1024"; do
        f=${c%%:*} want=${c#*:} rc=0
        timeout 10 "$DEDUPCTL" check -c "$WORK/$f.yaml" >"$WORK/$f.out" 2>&1 || rc=$?
        assert_eq "$rc" 1 "dedupctl check exit code on $f.yaml"
        grep -q "$want" "$WORK/$f.out" || fail "$f.yaml: expected '$want', got: $(head -c 300 "$WORK/$f.out")"
        (($(wc -c <"$WORK/$f.out") < 2000)) || fail "$f.yaml: $(wc -c <"$WORK/$f.out") bytes of messages"
done
log "ok: hostile configs refused at once, with short messages"
