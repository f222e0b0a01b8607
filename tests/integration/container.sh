#!/usr/bin/env bash
# Dockerfile, docker-compose.yml and .dockerignore, checked without a container
# engine (none runs where this project is tested): the image is a Release
# build from a context that holds the sources and nothing .gitignore keeps
# out, its runtime stage installs every library the binaries link, the
# compose file runs the Kafka and PostgreSQL the tests run, its healthcheck
# asks the port dedupd listens on, and dedupd's config there passes check.
. "$(dirname "$0")/lib.sh"

DF=$ROOT/Dockerfile DC=$ROOT/docker-compose.yml DI=$ROOT/.dockerignore CC=$ROOT/config/compose.yaml
git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1 || fail "$ROOT is not a git work tree"

# --- .dockerignore: Docker's rules for the patterns used here — a pattern
# matches a path whose leading components it matches (so a directory takes its
# contents along); **/P matches P in any component. Anything fancier is refused
# rather than misread.
mapfile -t PATTERNS < <(grep -v '^[[:space:]]*\(#\|$\)' "$DI")
for p in "${PATTERNS[@]}"; do
        [[ $p =~ ^(\*\*/)?[A-Za-z0-9._*/-]+$ && ${p#\*\*/} != *'**'* && $p != /* ]] ||
                fail ".dockerignore: pattern '$p' is beyond what this check reads"
done
docker_ignored() { # PATH: 0 when the context leaves it out
        local path=${1%/} p k prefix comp
        local -a parts
        IFS=/ read -ra parts <<<"$path"
        for p in "${PATTERNS[@]}"; do
                if [[ $p == '**/'* ]]; then
                        for comp in "${parts[@]}"; do
                                # shellcheck disable=SC2053 # the pattern is a glob
                                [[ $comp == ${p#\*\*/} ]] && return 0
                        done
                        continue
                fi
                IFS=/ read -ra k <<<"$p"
                ((${#parts[@]} >= ${#k[@]})) || continue
                prefix=$(IFS=/; echo "${parts[*]:0:${#k[@]}}")
                # shellcheck disable=SC2053
                [[ $prefix == $p ]] && return 0
        done
        return 1
}
for must in .git .run build build-asan build-dev; do
        docker_ignored "$must" || fail ".dockerignore lets $must into the build context"
done
while read -r path; do
        docker_ignored "$path" || fail ".gitignore keeps $path out of git, .dockerignore lets it into the build context"
done < <(git -C "$ROOT" ls-files --others --ignored --exclude-standard --directory)
log "ok: .git, .run, build*/ and everything git ignores stay out of the build context"

# The context Docker would send: the tracked files .dockerignore keeps.
CTX=$WORK/context
while read -r f; do
        docker_ignored "$f" && continue
        mkdir -p "$CTX/$(dirname "$f")" && cp -p "$ROOT/$f" "$CTX/$f"
done < <(git -C "$ROOT" ls-files)
# Every COPY from the context names something in it.
while read -r src; do
        [[ -e $CTX/$src ]] || fail "Dockerfile copies $src, which is not in the build context"
done < <(sed -n 's/^COPY \([^-][^ ]*\) .*/\1/p' "$DF")

# --- the build stage: Release, no tests, no fault points, the packages scripts/deps names.
build_cmd=$(sed -n '/^RUN cmake /,/[^\\]$/p' "$DF" | tr -d '\\\n')
[[ $build_cmd == *"-DCMAKE_BUILD_TYPE=Release"* ]] || fail "the image is not a Release build: $build_cmd"
[[ $build_cmd == *"-DDEDUPD_TESTS=OFF"* ]] || fail "the image builds the tests: $build_cmd"
[[ $build_cmd != *"DEDUPD_FAULT_POINTS=ON"* ]] || fail "the image has fault points: $build_cmd"
build_stage=$(awk '/^FROM /{n++} n == 1' "$DF")
runtime_stage=$(awk '/^FROM /{n++} n == 2' "$DF")
# Every library's -dev package scripts/deps installs, but cmocka and clang's
# runtimes (tests and fuzzing only).
mapfile -t dev_pkgs < <(tr -s ' \t' '\n\n' <"$ROOT/scripts/deps" | grep -E '^lib[a-z0-9.+-]+-dev$' |
        grep -v -e '^libcmocka-dev$' -e '^libclang-rt-[0-9]*-dev$' | sort -u)
((${#dev_pkgs[@]} >= 5)) || fail "found only ${#dev_pkgs[@]} -dev packages in scripts/deps: ${dev_pkgs[*]}"
for pkg in build-essential cmake ninja-build pkg-config "${dev_pkgs[@]}"; do
        grep -qw -- "$pkg" "$ROOT/scripts/deps" || fail "scripts/deps no longer names $pkg: update this list"
        grep -qw -- "$pkg" <<<"$build_stage" || fail "the Dockerfile's build stage does not install $pkg"
done
# Its cmake, on exactly that context: every source it needs is in it.
cmake -S "$CTX" -B "$WORK/context-build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEDUPD_TESTS=OFF >"$WORK/configure.log" 2>&1 ||
        fail "the Dockerfile's cmake fails on the build context: $(grep -A3 'CMake Error' "$WORK/configure.log" | head -n 20)"
log "ok: a Release build without tests or fault points, configured from the build context alone"

# --- the runtime stage installs the package of every library dedupd, dedupctl
# and the handlers link (libc is the base image's).
# pkg_of FILE: the Debian package that ships it (merged /usr: it may be registered under /lib)
pkg_of() {
        local f
        for f in "$1" "$(readlink -f "$1")" "${1#/usr}" "$(readlink -f "$1" | sed 's#^/usr##')"; do
                dpkg -S "$f" 2>/dev/null | head -n1 | cut -d: -f1 | grep . && return 0
        done
        return 1
}
for bin in "$BUILD/dedupd" "$BUILD/dedupctl" "$BUILD/transfer.so" "$BUILD/sql.so" "$BUILD/filesink.so"; do
        while read -r lib; do
                resolved=$(ldd "$bin" | awk -v l="$lib" '$1 == l {print $3}')
                pkg=$(pkg_of "$resolved") || fail "$(basename "$bin") links $lib, which no Debian package provides here"
                [[ $pkg == libc6 ]] && continue
                grep -qw -- "$pkg" <<<"$runtime_stage" || fail "$(basename "$bin") links $lib (package $pkg), which the runtime stage does not install"
        done < <(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
done
prefix=$(sed -n 's/.*-DCMAKE_INSTALL_PREFIX=\([^ ]*\).*/\1/p' <<<"$build_cmd")
grep -qx "COPY --from=build /stage$prefix $prefix" "$DF" || fail "the runtime stage does not copy the install of $prefix"
# A prefix other than /usr puts the handlers in lib/dedupd (tests/integration/sdk.sh checks that layout).
grep -qx "ENV DEDUPD_HANDLER_DIR=$prefix/lib/dedupd" "$DF" || fail "DEDUPD_HANDLER_DIR is not where $prefix's handlers go"
log "ok: the runtime stage installs every library the binaries and handlers link, and the handlers' directory"

# --- docker-compose.yml: the tests' Kafka and PostgreSQL.
pom_kafka=$(sed -n 's:.*<kafka\.version>\(.*\)</kafka\.version>.*:\1:p' "$ROOT/tests/broker/pom.xml")
assert_eq "$(sed -n 's/^ *image: apache\/kafka:\([^ ]*\).*/\1/p' "$DC")" "$pom_kafka" "compose's Kafka image version (tests/broker/pom.xml)"
assert_eq "$(sed -n 's/^ *image: postgres:\([^ ]*\).*/\1/p' "$DC")" "$(sed -n 's/^PG_APT_PKG=postgresql-//p' "$ROOT/scripts/services")" \
        "compose's PostgreSQL major version (scripts/services)"
grep -q '^      - ./config/compose.yaml:/etc/dedupd/dedupd.yaml:ro$' "$DC" || fail "compose does not mount config/compose.yaml where the image reads its config"

# The healthcheck asks /readyz on the port dedupd's config listens on.
listen=$(sed -n 's/^  listen: "\(.*\)"$/\1/p' "$CC")
assert_eq "$listen" "0.0.0.0:9400" "http.listen in config/compose.yaml"
grep -q "\"http://127.0.0.1:${listen##*:}/readyz\"\]$" "$DC" || fail "the compose healthcheck does not ask /readyz on port ${listen##*:}"
# Every ${VAR} without a default in the config is set by compose or the image.
for var in $(grep -o '\${[A-Z_][A-Z0-9_]*}' "$CC" | tr -d '${}' | sort -u); do
        grep -q "^      $var: " "$DC" || grep -q "^ENV $var=" "$DF" || fail "config/compose.yaml reads \${$var}, which neither compose nor the image sets"
done

# dedupd's config there passes check (its topic on the tests' broker, the
# handler from the suite's build). Until this build knows http.listen (the
# metrics server lands on main), the http block is checked by the lines above
# only.
"$KT" create -t payments -p 1 >/dev/null
"$KT" create -t payments.dlq -p 1 >/dev/null
cfg=$CC
# (the whole text first: grep -q would stop reading at its match, and the rest of a
# long text kill its writer with SIGPIPE, which pipefail makes the pipe's status)
if ! grep -q '^ *http\.listen ' <<<"$("$DEDUPD" --help-config)"; then
        log "note: this build has no http.listen yet; checking config/compose.yaml without its http block"
        sed '/^http:$/,/^$/d' "$CC" >"$WORK/compose-nohttp.yaml"
        cfg=$WORK/compose-nohttp.yaml
fi
rc=0
DEDUPD_HANDLER_DIR=$BUILD PG_DSN=$TEST_DSN "$DEDUPCTL" check -c "$cfg" >"$WORK/check.out" 2>&1 || rc=$?
cat "$WORK/check.out"
assert_eq "$rc" 0 "dedupctl check exit code on config/compose.yaml"
# Its one warning: 0.0.0.0 inside the container, so that compose can publish the port, which
# compose publishes on the host's loopback alone.
grep -q ': OK (namespace payments-service, 1 topic(s), 1 warning(s))$' "$WORK/check.out" &&
        grep -q "warning: http.listen 0.0.0.0:9400 is not a loopback address" "$WORK/check.out" ||
        fail "config/compose.yaml is not OK with the one warning of its http.listen"
grep -q '^    ports: \["127.0.0.1:9400:9400"\]$' "$DC" || fail "compose publishes the endpoints beyond the host's loopback"
log "ok: docker-compose.yml runs the tests' Kafka $pom_kafka and its dedupd config passes check"
