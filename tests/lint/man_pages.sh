#!/usr/bin/env bash
# tests/lint/man_pages.sh BUILD — dedupd(8), dedupctl(1) and dedupd.yaml(5)
# are installed by `cmake --install` (component man) and man shows them: each
# its name line, dedupd.yaml(5) every setting the table has (a row of it picked
# from each importance) as the running dedupctl prints it.
set -euo pipefail
BUILD=$1
P=$(mktemp -d)
trap 'rm -rf "$P"' EXIT
cmake --install "$BUILD" --prefix "$P" --component man >/dev/null
fail() { echo "man_pages.sh: $*" >&2; exit 1; }
show() { MANPATH= MANWIDTH=100 man -M "$P/share/man" "$1" "$2" 2>/dev/null | col -b; }
for page in "8 dedupd" "1 dedupctl" "5 dedupd.yaml"; do
  read -r sec name <<<"$page"
  [[ -f $P/share/man/man$sec/$name.$sec ]] || fail "$name($sec) is not installed under share/man/man$sec"
  grep -q "^NAME" <<<"$(show "$sec" "$name")" || fail "man $sec $name shows no NAME section"
done
grep -q "dedupd - apply each message.s effect exactly once" <<<"$(show 8 dedupd)" || fail "dedupd(8) without its name line"
grep -q "help-config" <<<"$(show 1 dedupctl)" || fail "dedupctl(1) does not list help-config"
yaml=$(show 5 dedupd.yaml)
for key in namespace postgres.conninfo 'topics\[\].batch.max_messages' rabbitmq.heartbeat_s limits.json_depth; do
  grep -q "^ *$key (" <<<"$yaml" || fail "dedupd.yaml(5) has no entry for $key"
done
n=$("$BUILD/dedupctl" help-config --man | grep -c '^\*\*')
m=$(grep -cE '^ {7}[^ ]+ \((string|integer|duration|boolean|enum|tree|map|list)' <<<"$yaml")
[[ $n == "$m" ]] || fail "dedupd.yaml(5) shows $m settings, the table has $n"
echo "man_pages.sh: dedupd(8), dedupctl(1) and dedupd.yaml(5) ($n settings) installed and shown by man"
