#!/usr/bin/env bash
# The metrics endpoint under hostile clients. dedupctl check warns when http.listen is reachable
# from other hosts. A client holding 100 idle sockets open locks out
# only itself — /readyz, /healthz and /metrics keep answering every other address (they used
# to wait behind the 64 connections it held) — its sockets beyond http.max_connections_per_ip
# are closed at once, and the ones it keeps are closed after http.idle_timeout_s of silence,
# after which its own address is served again.
. "$(dirname "$0")/lib.sh"

T="pay_metrics_clients_$$"
topic "$T" 1

# serve NAME HTTP_YAML: start dedupd with these http: settings; ADDR is where it serves
serve() {
        write_config "$WORK/$1.yaml" "$T"
        printf 'http:\n%s\n' "$2" >>"$WORK/$1.yaml"
        start "$1" "$WORK/$1.yaml"
        ADDR=
        for ((i = 0; i < 200; i++)); do
                ADDR=$(sed -n 's#.*serving /metrics, /healthz and /readyz on http://\([0-9.:]*\).*#\1#p' "$WORK/$1.log")
                [[ -n $ADDR ]] && break
                sleep 0.1
        done
        [[ -n $ADDR ]] || fail "dedupd $1 did not say where it serves: $(tail -5 "$WORK/$1.log")"
        # (asked from 127.0.0.2: a probe's connection from 127.0.0.1 could still count against its limit)
        for ((i = 0; i < 300; i++)); do [[ $(get 127.0.0.2 /readyz) == 200 ]] && return; sleep 0.1; done
        fail "dedupd $1 never ready: $(tail -5 "$WORK/$1.log")"
}

# get FROM PATH: the HTTP status of GET PATH from source address FROM (000: no answer within 10 s)
get() { curl -s --interface "$1" --max-time 10 -o "$WORK/body" -w '%{http_code}' "http://$ADDR$2" || true; }

# open_idle N: N connections from 127.0.0.1 that never send a byte
FDS=()
open_idle() {
        local fd
        for ((i = 0; i < $1; i++)); do
                exec {fd}<>"/dev/tcp/${ADDR%:*}/${ADDR##*:}"
                FDS+=("$fd")
        done
}

# reap: close our side of every connection the server has closed (EOF or reset); OPEN is how
# many are left. The server never sends first, so an open one gives nothing at all.
reap() {
        local left=() fd rc
        for fd in "${FDS[@]}"; do
                rc=0
                read -r -t 0.01 -u "$fd" _ 2>/dev/null || rc=$?
                if ((rc > 0 && rc <= 128)); then exec {fd}<&-; else left+=("$fd"); fi
        done
        FDS=("${left[@]}")
        OPEN=${#FDS[@]}
}

# wait_open N: until at most N of ours are open (60 s at most)
wait_open() {
        for ((w = 0; w < 600; w++)); do
                reap
                ((OPEN <= $1)) && return
                sleep 0.1
        done
        fail "$OPEN connections still open, expected at most $1"
}

# Off by default; on loopback said nothing of; anywhere else, check warns and says behind what.
for l in '""' '"127.0.0.1:9400"' '"[::1]:9400"' '"localhost:9400"' '"0.0.0.0:9400"' '":9400"' '"[::]:9400"' '"10.1.2.3:9400"'; do
        write_config "$WORK/l.yaml" "$T"
        printf 'http:\n  listen: %s\n' "$l" >>"$WORK/l.yaml"
        rc=0
        "$DEDUPCTL" check --offline -c "$WORK/l.yaml" >"$WORK/l.out" 2>&1 || rc=$?
        assert_eq "$rc" 0 "dedupctl check exit code with http.listen $l"
        if [[ $l == '""' || $l == *127.0.0.1* || $l == *::1* || $l == *localhost* ]]; then
                if grep -q "http.listen" "$WORK/l.out"; then fail "a warning for http.listen $l: $(cat "$WORK/l.out")"; fi
        else
                grep -qF "$WORK/l.yaml: warning: http.listen ${l//\"/} is not a loopback address: " "$WORK/l.out" &&
                        grep -q "no authentication and no TLS.*Prometheus network.*reverse proxy" "$WORK/l.out" ||
                        fail "no warning for http.listen $l: $(cat "$WORK/l.out")"
        fi
done
log "ok: dedupctl check warns of an http.listen that is not loopback, and only of those"

# As an operator runs it: the defaults (8 per address, 10 s idle).
serve d1 '  listen: "127.0.0.1:0"'
open_idle 100
assert_eq "$(get 127.0.0.2 /readyz)" 200 "/readyz from another address beside 100 idle connections from 127.0.0.1"
assert_eq "$(get 127.0.0.2 /metrics)" 200 "/metrics from another address"
grep -q '^dedupd_build_info{' "$WORK/body" || fail "/metrics without dedupd's metrics: $(head -c 300 "$WORK/body")"
assert_eq "$(get 127.0.0.3 /healthz)" 200 "/healthz from a third address"
wait_open 8
log "ok: of 100 idle connections from 127.0.0.1 the server closed all but $OPEN (http.max_connections_per_ip, default 8)"
wait_open 0
log "ok: the 8 idle connections were closed by the server (http.idle_timeout_s, default 10)"
assert_eq "$(get 127.0.0.1 /readyz)" 200 "/readyz from 127.0.0.1 once its idle connections are gone"
stop d1

# The settings: 3 per address, and an idle timeout of an hour, so what stays open is the limit.
serve d2 '  listen: "127.0.0.1:0"
  max_connections_per_ip: 3
  idle_timeout_s: 3600'
open_idle 20
wait_open 3
assert_eq "$OPEN" 3 "idle connections kept with max_connections_per_ip 3"
rc=0
curl -s --interface 127.0.0.1 --max-time 10 -o /dev/null "http://$ADDR/readyz" || rc=$?
[[ $rc == 52 || $rc == 56 ]] || fail "a fourth connection from 127.0.0.1: curl exit $rc, expected it closed at once (52 or 56)"
log "ok: a fourth connection from 127.0.0.1 is closed, not kept waiting (curl exit $rc)"
assert_eq "$(get 127.0.0.2 /readyz)" 200 "/readyz from another address"
stop d2
for fd in "${FDS[@]}"; do exec {fd}<&-; done
