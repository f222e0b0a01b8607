#!/usr/bin/env bash
# What `cmake --install` gives an operator and a handler author: a default
# build installed into a fresh prefix has every file where docs/operating.md (Installing) says,
# no fault points (DEDUPD_FAULT cannot kill it), a --version that says so, a
# systemd unit systemd accepts, example configs dedupctl check accepts with
# every setting and its default, and an SDK that builds a handler out of tree
# with pkg-config and with find_package(dedupd) — both loaded by dedupctl —
# the hello example built from its installed source the same two ways and
# run by the installed dedupd, and a handler built against ABI 1.1's header
# loaded and run unchanged.
. "$(dirname "$0")/lib.sh"
require_fault_points # the suite's build is the control that DEDUPD_FAULT does kill

B=$WORK/build P=$WORK/prefix
DOC=$P/share/doc/dedupd HDIR=$P/lib/dedupd
VERSION=$(sed -n 's/^project(dedupd VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
ABI=$(sed -n 's/^#define DEDUPD_HANDLER_ABI_MAJOR \([0-9]*\)$/\1/p' "$ROOT/include/dedupd/handler.h")

# The default build type (RelWithDebInfo: the one that used to carry fault
# points) with default options; only what is installed is built.
log "building and installing into $P"
cmake -S "$ROOT" -B "$B" -G Ninja -DDEDUPD_TESTS=OFF -DCMAKE_INSTALL_PREFIX="$P" >"$WORK/configure.log" 2>&1 ||
        fail "configure: $(tail -n 20 "$WORK/configure.log")"
ninja -C "$B" dedupd dedupctl transfer sql filesink hello man >"$WORK/build.log" 2>&1 || fail "build: $(tail -n 20 "$WORK/build.log")"
cmake --install "$B" >"$WORK/install.log" 2>&1 || fail "install: $(tail -n 20 "$WORK/install.log")"

for f in bin/dedupd bin/dedupctl lib/dedupd/transfer.so lib/dedupd/sql.so lib/dedupd/filesink.so \
        lib/dedupd/hello.so share/doc/dedupd/examples/hello.c include/dedupd/handler.h lib/pkgconfig/dedupd-handler.pc lib/cmake/dedupd/dedupdConfig.cmake \
        lib/cmake/dedupd/dedupdConfigVersion.cmake lib/cmake/dedupd/dedupdTargets.cmake \
        lib/systemd/system/dedupd.service share/doc/dedupd/dedupd.example.yaml \
        share/doc/dedupd/dedupd.minimal.yaml share/man/man8/dedupd.8 share/man/man1/dedupctl.1 \
        share/man/man5/dedupd.yaml.5; do
        [[ -s $P/$f ]] || fail "not installed: $f"
done
[[ -x $P/bin/dedupd && -x $P/bin/dedupctl ]] || fail "installed binaries are not executable"
log "ok: every file installed"

# cmake --install --prefix X (the build configured for P): the unit, the .pc
# and the example configs name X, not P (nor /usr/local).
X=$WORK/other-prefix
cmake --install "$B" --prefix "$X" >"$WORK/install-x.log" 2>&1 || fail "install --prefix: $(tail -n 20 "$WORK/install-x.log")"
for want in "ExecStart=$X/bin/dedupd -c /etc/dedupd/dedupd.yaml" "Environment=DEDUPD_HANDLER_DIR=$X/lib/dedupd"; do
        grep -qxF "$want" "$X/lib/systemd/system/dedupd.service" || fail "the unit installed with --prefix $X lacks: $want"
done
assert_eq "$(PKG_CONFIG_PATH=$X/lib/pkgconfig pkg-config --variable=handlerdir dedupd-handler | xargs realpath -m)" "$X/lib/dedupd" \
        "handlerdir of the .pc installed with --prefix"
for prefix in "$P" "$X"; do
        for cfg in dedupd.example.yaml dedupd.minimal.yaml; do
                grep -qF "\${DEDUPD_HANDLER_DIR:-$prefix/lib/dedupd}/transfer.so" "$prefix/share/doc/dedupd/$cfg" ||
                        fail "$prefix/share/doc/dedupd/$cfg does not fall back to $prefix/lib/dedupd"
                if grep -F /usr/local "$prefix/share/doc/dedupd/$cfg"; then fail "$cfg installed into $prefix names /usr/local"; fi
        done
done
if grep -rlF "$P" "$X/lib/systemd" "$X/lib/pkgconfig" "$X/share/doc/dedupd"; then fail "files installed with --prefix $X name $P"; fi
log "ok: cmake --install --prefix $X: the unit, the .pc and the example configs name $X"

# Hardened as Debian builds its own packages: in every installed program and handler full RELRO
# (-z relro -z now), the stack protector and fortified libc calls (-fstack-protector-strong,
# -D_FORTIFY_SOURCE=2), the programs position-independent; and hardening-check (devscripts),
# which also finds the stack clash probes, has nothing to say.
ELFS=(bin/dedupd bin/dedupctl lib/dedupd/transfer.so lib/dedupd/sql.so lib/dedupd/filesink.so lib/dedupd/hello.so)
for f in "${ELFS[@]}"; do
        readelf -lW "$P/$f" | grep -q ' GNU_RELRO ' || fail "$f: no GNU_RELRO segment (-z relro)"
        readelf -dW "$P/$f" | grep -Eq '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW' || fail "$f: no BIND_NOW (-z now)"
        readelf -W --dyn-syms "$P/$f" >"$WORK/syms"
        grep -q ' __stack_chk_fail' "$WORK/syms" || fail "$f: no __stack_chk_fail (-fstack-protector-strong)"
        grep -Eq ' __[a-z0-9_]+_chk(@| |$)' "$WORK/syms" || fail "$f: no fortified libc call (-D_FORTIFY_SOURCE=2)"
done
for f in bin/dedupd bin/dedupctl; do
        readelf -hW "$P/$f" | grep -Eq 'Type: +DYN' || fail "$f is not position-independent (PIE)"
done
command -v hardening-check >/dev/null || fail "hardening-check is missing (scripts/deps installs devscripts)"
# Control-flow protection needs a C runtime built for it, which Debian 12's is not.
hardening-check --nocfprotection --quiet "${ELFS[@]/#/$P/}" >"$WORK/hardening.out" 2>&1 ||
        fail "hardening-check: $(cat "$WORK/hardening.out")"
hardening-check --nocfprotection "$P/bin/dedupd" | grep -q 'Stack clash protection: yes' ||
        fail "bin/dedupd: no stack clash probes (-fstack-clash-protection)"
log "ok: the installed programs and handlers are hardened (RELRO, BIND_NOW, stack protector, fortify, stack clash, PIE)"

# --version of the installed programs, and no fault points in them.
for prog in dedupd dedupctl; do
        "$P/bin/$prog" --version >"$WORK/$prog.version" || fail "installed $prog --version exited $?"
        cat "$WORK/$prog.version"
        assert_eq "$(sed -n 1p "$WORK/$prog.version")" "$prog $VERSION (handler ABI $ABI)" "installed $prog --version, line 1"
        assert_eq "$(sed -n 2p "$WORK/$prog.version")" "librdkafka $(pkg-config --modversion rdkafka), librabbitmq $(pkg-config --modversion librabbitmq), nats.c $(pkg-config --modversion libnats)" "installed $prog --version, line 2 (the brokers' client libraries)"
        assert_eq "$(sed -n 3p "$WORK/$prog.version")" "libpq $(pkg-config --modversion libpq)" "installed $prog --version, line 3"
        assert_eq "$(sed -n '$p' "$WORK/$prog.version")" "fault points: none (DEDUPD_FAULT is ignored)" "installed $prog --version, last line"
done

# DEDUPD_FAULT=after_poll:1:kill: the suite's build dies at its first batch,
# the installed one applies the message and stops cleanly.
T="sdk_fault_$$"
topic "$T" 1
write_config "$WORK/control.yaml" "$T"
BUILD=$HDIR write_config "$WORK/installed.yaml" "$T"
printf '%s\n' '{"order_id":"f1","user_id":1,"amount":10}' | "$KT" produce -t "$T"
DEDUPD_FAULT=after_poll:1:kill start control "$WORK/control.yaml"
rc=0; wait "${PIDS[control]}" || rc=$?; unset "PIDS[control]"
assert_eq "$rc" 137 "exit status of the suite's build (fault points) with DEDUPD_FAULT=after_poll:1:kill"
assert_eq "$(progressed "$T")" 0 "records the killed control committed"
DEDUPD=$P/bin/dedupd DEDUPD_FAULT=after_poll:1:kill start installed "$WORK/installed.yaml"
wait_done "$T" 60
stop installed # fails unless it exits 0
assert_eq "$(sql "SELECT status FROM dedupd.keys WHERE idem_key = 'f1/PAY'")" DONE "the installed dedupd's outcome under DEDUPD_FAULT"
if grep -qF "[fault]" "$WORK/installed.log"; then fail "the installed dedupd armed a fault point: $(grep -F "[fault]" "$WORK/installed.log")"; fi
log "ok: DEDUPD_FAULT kills the test build and is ignored by the installed one"

# The systemd unit: configured for this prefix, and accepted by systemd as is
# (systemd-analyze prints unknown or misspelled settings without failing).
UNIT=$P/lib/systemd/system/dedupd.service
for want in "Type=notify" "NotifyAccess=main" "ExecStart=$P/bin/dedupd -c /etc/dedupd/dedupd.yaml" \
        'ExecReload=/bin/kill -HUP $MAINPID' "WatchdogSec=60s" "Restart=on-failure" "User=dedupd" \
        "Environment=DEDUPD_HANDLER_DIR=$HDIR" "ProtectSystem=strict" "NoNewPrivileges=yes" "PrivateTmp=yes"; do
        grep -qxF "$want" "$UNIT" || fail "the installed unit lacks the line: $want"
done
rc=0; systemd-analyze verify "$UNIT" >"$WORK/verify.out" 2>&1 || rc=$?
[[ $rc -eq 0 && ! -s $WORK/verify.out ]] || fail "systemd-analyze verify (exit $rc): $(cat "$WORK/verify.out")"
log "ok: the unit runs $P/bin/dedupd and systemd-analyze verify has nothing to say"

# The example configs, as installed, pass check against the real broker (their
# topic is payments) with the installed handlers.
"$KT" create -t payments -p 1 >/dev/null
"$KT" create -t payments.dlq -p 1 >/dev/null
check_as_installed() { # FILE WHAT
        local out=$WORK/$(basename "$1").check rc=0
        DEDUPD_HANDLER_DIR=$HDIR PG_DSN=$TEST_DSN "$P/bin/dedupctl" check -c "$1" >"$out" 2>&1 || rc=$?
        cat "$out"
        assert_eq "$rc" 0 "dedupctl check exit code on $2"
        grep -q "^topic payments: key {json:order_id}/PAY, handler transfer 1.1 (ABI $ABI), dead letters to payments.dlq$" "$out" ||
                fail "$2: check does not name the transfer handler"
        grep -q ": OK (namespace payments-service, 1 topic(s))$" "$out" || fail "$2: check is not OK without warnings"
}
check_as_installed "$DOC/dedupd.example.yaml" "the example config"
check_as_installed "$DOC/dedupd.minimal.yaml" "the minimal config"
# Once this build knows http.listen (the metrics and health endpoints), the
# example's commented-out block must pass too.
if grep -q '^ *http\.listen ' <<<"$("$P/bin/dedupd" --help-config)"; then # (not a pipe: see container.sh)
        sed -e 's/^#http:$/http:/' -e 's/^#  listen: /  listen: /' "$DOC/dedupd.example.yaml" >"$WORK/example-http.yaml"
        grep -q '^  listen: ' "$WORK/example-http.yaml" || fail "the example has no http.listen to uncomment"
        check_as_installed "$WORK/example-http.yaml" "the example config with http.listen"
else
        log "note: this build has no http.listen yet; the example keeps it commented out"
fi

# The example shows every setting of --help-config, each with its default
# (read from its column: a "" default leaves it blank).
missing=()
while IFS= read -r row; do
        read -r key type _ <<<"$row"
        def=${row:60}
        def=${def%% *}
        [[ -n $def ]] || def=-
        leaf=${key##*.}
        if [[ $def == required || $def == - || $type =~ ^(section|list|map|tree)$ ]]; then
                re="^[# -]*${leaf}:( |$)"
        else
                re="^[# -]*${leaf}: \"?$(sed 's/[][\.*^$+?(){}|/]/\\&/g' <<<"$def")\"?( |$)"
        fi
        grep -Eq "$re" "$DOC/dedupd.example.yaml" || missing+=("$key (default $def)")
done < <("$P/bin/dedupd" --help-config | tail -n +2)
((${#missing[@]} == 0)) || fail "the example config lacks, or shows another default for: ${missing[*]}"
log "ok: the example config shows all $("$P/bin/dedupd" --help-config | tail -n +2 | wc -l) settings with their defaults"

# A handler built out of tree, with pkg-config ...
export PKG_CONFIG_PATH=$P/lib/pkgconfig
# (relocatable: its prefix is ${pcfiledir}/../.., so paths come as P/lib/pkgconfig/../..)
assert_eq "$(realpath -m "$(pkg-config --variable=handlerdir dedupd-handler)")" "$HDIR" "pkg-config handlerdir"
assert_eq "$(pkg-config --modversion dedupd-handler)" "$VERSION" "pkg-config version"
cflags=$(pkg-config --cflags dedupd-handler)
inc=$(sed -n 's/.*-I\([^ ]*\/lib\/pkgconfig\/\.\.\/\.\.\/include\)\( .*\|$\)/\1/p' <<<"$cflags")
[[ -n $inc && $(realpath -m "$inc") == "$P/include" && " $cflags " == *" $(pkg-config --cflags libpq) "* ]] ||
        fail "pkg-config --cflags dedupd-handler: $cflags"
FIX=$ROOT/tests/fixtures/sdk
# shellcheck disable=SC2046 # pkg-config's words are separate arguments
cc -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Wno-unused-parameter -DHANDLER_NAME='"sdk_pc"' \
        -o "$WORK/sdk_pc.so" "$FIX/my_handler.c" $(pkg-config --cflags --libs dedupd-handler) ||
        fail "cc with pkg-config dedupd-handler failed"
# shellcheck disable=SC2046
cc -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror -o "$WORK/hello_pc.so" "$DOC/examples/hello.c" \
        $(pkg-config --cflags --libs dedupd-handler) || fail "cc of the installed hello.c with pkg-config failed"
# ... and with find_package(dedupd), installed into the handler directory it names.
cmake -S "$FIX" -B "$WORK/cmake-handler" -G Ninja -DCMAKE_PREFIX_PATH="$P" -DHELLO_SOURCE="$DOC/examples/hello.c" >"$WORK/handler-configure.log" 2>&1 ||
        fail "find_package(dedupd): $(tail -n 20 "$WORK/handler-configure.log")"
ninja -C "$WORK/cmake-handler" >"$WORK/handler-build.log" 2>&1 || fail "handler build: $(tail -n 20 "$WORK/handler-build.log")"
cmake --install "$WORK/cmake-handler" >/dev/null || fail "handler install"
[[ -f $HDIR/sdk_cmake.so && -f $HDIR/hello_cmake.so ]] || fail "find_package(dedupd) installed no $HDIR/sdk_cmake.so or hello_cmake.so"
# A handler built against ABI 1.1's header (tests/fixtures/sdk/abi-1.1): what a
# handler author's existing build gives, never rebuilt for ABI 1.2.
# shellcheck disable=SC2046
cc -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Wno-unused-parameter -DHANDLER_NAME='"sdk_old"' \
        -I "$FIX/abi-1.1" -o "$WORK/sdk_old.so" "$FIX/my_handler.c" $(pkg-config --libs dedupd-handler) \
        $(pkg-config --cflags libpq) || fail "cc against the ABI 1.1 header failed"
unset PKG_CONFIG_PATH

# Both load in the installed dedupctl: the descriptor found, its ABI accepted.
T2="sdk_handler_$$"
topic "$T2" 1
for so in "$WORK/sdk_pc.so" "$HDIR/sdk_cmake.so" "$WORK/sdk_old.so" "$WORK/hello_pc.so" "$HDIR/hello_cmake.so"; do
        name=$(basename "$so" .so)
        shown=$name
        [[ $name == hello_* ]] && shown="hello 1.0"
        sed "s#path: \".*transfer.so\"#path: \"$so\"#; s#^  - name: .*#  - name: $T2#" "$WORK/installed.yaml" >"$WORK/$name.yaml"
        rc=0; "$P/bin/dedupctl" check -c "$WORK/$name.yaml" >"$WORK/$name.check" 2>&1 || rc=$?
        cat "$WORK/$name.check"
        assert_eq "$rc" 0 "dedupctl check exit code with the $name handler"
        grep -q "^topic $T2: key {json:order_id}/PAY, handler $shown (ABI $ABI), dead letters to $T2.dlq$" "$WORK/$name.check" ||
                fail "check does not name handler $shown"
done
log "ok: handlers built with pkg-config and with find_package(dedupd), hello among them, and one built against ABI 1.1 load in the installed dedupctl"

# They run in the installed dedupd: the ABI 1.1 handler as it always did, and
# hello (built from the installed example) on exec, ensure_schema and
# set_evidence — a payment applied once, one it cannot cover rejected, and
# verify counting its ledger.
printf '%s\n' '{"order_id":"o1","user_id":1,"amount":10}' | "$KT" produce -t "$T2"
DEDUPD=$P/bin/dedupd start old "$WORK/sdk_old.yaml"
wait_done "$T2" 60
stop old
assert_eq "$(sql "SELECT status || ': ' || response FROM dedupd.keys WHERE topic = '$T2' AND idem_key = 'o1/PAY'")" "DONE: OK" \
        "the ABI 1.1 handler's outcome"
T3="sdk_hello_$$"
topic "$T3" 1
sed "s#^  - name: .*#  - name: $T3#" "$WORK/hello_pc.yaml" >"$WORK/hello_run.yaml"
"$P/bin/dedupctl" migrate -c "$WORK/hello_run.yaml" >"$WORK/hello_migrate.out" 2>&1 ||
        fail "migrate with hello: $(cat "$WORK/hello_migrate.out")"
sql "INSERT INTO hello_account VALUES (1, 25)"
printf '%s\n' '{"order_id":"h1","user_id":1,"amount":20}' '{"order_id":"h1","user_id":1,"amount":20}' \
        '{"order_id":"h2","user_id":1,"amount":20}' | "$KT" produce -t "$T3"
DEDUPD=$P/bin/dedupd start hello "$WORK/hello_run.yaml"
wait_done "$T3" 60
stop hello
assert_eq "$(sql "SELECT balance FROM hello_account WHERE user_id = 1")" 5 "balance after hello"
assert_eq "$(sql "SELECT string_agg(idem_key || '=' || status, ' ' ORDER BY idem_key) FROM dedupd.keys WHERE topic = '$T3'")" \
        "h1/PAY=DONE h2/PAY=FAILED" "hello's outcomes"
rc=0; "$P/bin/dedupctl" verify -c "$WORK/hello_run.yaml" >"$WORK/hello_verify.out" 2>&1 || rc=$?
cat "$WORK/hello_verify.out"
assert_eq "$rc" 0 "verify exit code after hello"
grep -qF "  hello_ledger (handler hello, topic $T3)" "$WORK/hello_verify.out" || fail "verify did not count hello_ledger"
log "ok: the ABI 1.1 handler and hello (from the installed SDK) run in the installed dedupd"
