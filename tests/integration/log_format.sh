#!/usr/bin/env bash
# --log-format json: every line dedupd writes — its own, librdkafka's, the
# handler's, config errors — is one JSON object a log shipper can parse,
# with messages that hold quotes, newlines and bytes that are not UTF-8.
# The flag wins over log_format in the config.
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "jq is not installed (scripts/deps installs it)"

# bad_lines FILE: lines that are not a JSON object with ts, level, pid and msg
bad_lines() {
        jq -R -r 'try (fromjson | if type == "object" and (.ts | type) == "string" and (.level | type) == "string"
                and (.pid | type) == "number" and (.msg | type) == "string" then empty else "bad: \(.)" end)
                catch "not JSON"' "$1" | grep -c . || true
}

T="pay_logfmt_$$"
topic "$T" 2
LOG_LEVEL=debug write_config "$WORK/c.yaml" "$T"
# librdkafka's own debug lines too (group protocol), through its log callback
sed -i 's/^kafka:$/kafka:\n  debug: "cgrp"/' "$WORK/c.yaml"
{
        printf '%s\n' '{"order_id":"1","user_id":1,"amount":10}' '{"order_id":"1","user_id":1,"amount":10}'
        # rejected (more than the balance): its key is logged at INFO
        printf '%s\n' '{"order_id":"q\"uo\nte","user_id":2,"amount":5000}' '{"order_id":"q\"uo\nte","user_id":2,"amount":5000}'
        printf '{"order_id":"bad\xff\xfe","user_id":3,"amount":10}\n'
        printf 'not json \xff at all\n'
} | "$KT" produce -p 0 -t "$T"
"$DEDUPD" --log-format json -c "$WORK/c.yaml" >"$WORK/d1.log" 2>&1 &
PIDS[d1]=$!
wait_done "$T"
stop d1

lines=$(wc -l <"$WORK/d1.log")
((lines >= 20)) || fail "only $lines log lines"
assert_eq "$(bad_lines "$WORK/d1.log")" 0 "lines of $lines that are not a JSON log object"
assert_eq "$(jq -r 'select(.ctx == "dedupd" and .msg == "stopped cleanly") | .level' "$WORK/d1.log")" info "the clean stop, as JSON"
(($(jq -r 'select(.ctx == "kafka") | .msg' "$WORK/d1.log" | grep -c CGRP || true) > 0)) ||
        fail "no librdkafka line came through the logger"
(($(jq -r 'select(.ctx == "handler:transfer") | .msg' "$WORK/d1.log" | grep -c . || true) > 0)) ||
        fail "no handler line came through the logger"
# A key with a quote and a newline is logged as it is, inside its line.
got=$(jq -r --arg k $'q"uo\nte/PAY' 'select(.msg | contains($k)) | .ctx' "$WORK/d1.log" | head -n 1)
assert_eq "$got" "topic:$T" "the line naming key q\"uo\\nte/PAY, whole"
# Payloads that are not UTF-8 or not JSON: dead-lettered, and said so in lines that parse.
assert_eq "$(jq -r 'select(.level == "warn" and (.msg | contains("dead-lettered"))) | .msg' "$WORK/d1.log" | grep -c . || true)" 2 \
        "dead-letter lines for the payloads that are not UTF-8 or not JSON"

# log_format: json in the config alone; and the flag overriding it.
sed 's/^log_level: debug$/log_level: info\nlog_format: json/; /debug: "cgrp"/d' "$WORK/c.yaml" >"$WORK/json.yaml"
start d2 "$WORK/json.yaml"
wait_done "$T"
stop d2
assert_eq "$(bad_lines "$WORK/d2.log")" 0 "non-JSON lines with log_format: json"
"$DEDUPD" --log-format human -c "$WORK/json.yaml" >"$WORK/d3.log" 2>&1 &
PIDS[d3]=$!
sleep 3
stop d3
grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z [0-9]+ INFO  \[dedupd\] starting: ' "$WORK/d3.log" ||
        fail "--log-format human did not win: $(head -n 1 "$WORK/d3.log")"
assert_eq "$(jq -R 'fromjson? // empty' "$WORK/d3.log" | grep -c . || true)" 0 "JSON lines under --log-format human"
log "ok: log_format in the config, and the flag over it"

# Config errors, when the flag asks for JSON, are JSON lines too.
printf 'namespace: x\ncolour: blue\n' >"$WORK/bad.yaml"
rc=0
"$DEDUPD" --log-format json -c "$WORK/bad.yaml" >"$WORK/bad.log" 2>&1 || rc=$?
assert_eq "$rc" 2 "exit code on a bad config"
assert_eq "$(bad_lines "$WORK/bad.log")" 0 "non-JSON lines about a bad config"
jq -e -s 'map(select(.level == "error" and .ctx == "config" and (.msg | contains("bad.yaml:2:1: unknown key")))) | length == 1' \
        "$WORK/bad.log" >/dev/null || fail "config error not reported: $(cat "$WORK/bad.log")"
log "ok: config errors as JSON"
