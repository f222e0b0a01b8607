#!/usr/bin/env bash
# tests/lint/doc_blocks.sh DEDUPCTL HANDLER_DIR ROOT — every config and every
# handler shown in README.md and docs/ works as shown:
#   ```yaml           a whole config: `dedupctl check --offline` accepts it
#                     (handler paths point at HANDLER_DIR, the build's handlers;
#                     each ${VAR} it names is given a value of its kind)
#   ```c              a whole translation unit: compiles with
#                     cc -fsyntax-only -Wall -Werror -I include (and libpq's flags)
#   ```yaml fragment  a part of a config, shown on its own: not checked
#   ```c fragment     a part of a handler: not checked
# A block of any kind on the line after <!-- file: PATH --> is PATH verbatim:
# byte-identical to that file of the tree (so the guide cannot drift from the
# handler its test runs).
# The convention is the one docs/CONTRIBUTING.md states.
set -euo pipefail
DEDUPCTL=$1 HANDLERS=$2 ROOT=$3
cd "$ROOT"
CC=${CC:-cc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mapfile -t files < <(printf '%s\n' README.md; find docs -name '*.md' ! -path 'docs/man/*' | sort)
: >"$work/index"
: >"$work/verbatim"

# Each block to check as $work/N.yaml or $work/N.c, and "N<TAB>FILE:LINE" in
# $work/index; each block under a file marker as $work/vM, and
# "M<TAB>FILE:LINE<TAB>PATH" in $work/verbatim (PATH empty: a marker with no block).
for f in "${files[@]}"; do
  awk -v f="$f" -v dir="$work" -v base="$(wc -l <"$work/index")" -v vbase="$(wc -l <"$work/verbatim")" '
    BEGIN { n = base; m = vbase }
    function lost() { if (want != "") print ++m "\t" f ":" wantline "\t" >>(dir "/verbatim"); want = "" }
    /^<!-- file: [^ ]+ -->$/ && !fence { lost(); want = $3; wantline = NR; next }
    /^```/ && !fence { fence = 1; info = substr($0, 4); out = ""; vout = ""
                       if (info == "yaml" || info == "c") {
                         n++; out = dir "/" n "." info; print n "\t" f ":" NR >>(dir "/index") }
                       if (want != "") {
                         m++; vout = dir "/v" m; printf "" >vout
                         print m "\t" f ":" NR "\t" want >>(dir "/verbatim"); want = "" }
                       next }
    /^```/ && fence { fence = 0; if (out) close(out); if (vout) close(vout); out = vout = ""; next }
    !fence { lost() }
    fence && out { print >out }
    fence && vout { print >vout }
    END { lost() }' "$f"
done

# A value for each ${VAR} a config names, by what the variable is for.
value_for() {
  case $1 in
    PG_DSN | *CONNINFO*) echo "host=127.0.0.1 port=1 dbname=doc user=doc" ;;
    KAFKA_BOOTSTRAP*) echo "127.0.0.1:1" ;;
    NATS_URL*) echo "nats://127.0.0.1:1" ;;
    RABBITMQ_URL*) echo "amqp://doc:doc@127.0.0.1:1/%2F" ;;
    *URL*) echo "http://127.0.0.1:1" ;;
    *) echo "doc-value" ;;
  esac
}

checked=0 bad=0
while IFS=$'\t' read -r m where path; do
  checked=$((checked + 1))
  if [[ -z $path ]]; then
    echo "$where: a <!-- file: --> marker with no block on the next line" >&2; bad=$((bad + 1))
  elif [[ ! -f $path ]]; then
    echo "$where: the block is marked as $path, which does not exist" >&2; bad=$((bad + 1))
  elif ! cmp -s "$path" "$work/v$m"; then
    echo "$where: the block is not $path verbatim (copy the file into it):" >&2
    diff "$path" "$work/v$m" | sed 's/^/  /' >&2 || true; bad=$((bad + 1))
  fi
done <"$work/verbatim"
while IFS=$'\t' read -r n where; do
  checked=$((checked + 1))
  if [[ -f $work/$n.c ]]; then
    # shellcheck disable=SC2046 # pkg-config's flags are words
    if ! "$CC" -fsyntax-only -Wall -Werror -I include $(pkg-config --cflags libpq) -x c "$work/$n.c" \
        >"$work/$n.out" 2>&1; then
      echo "$where: the C block does not compile (mark it \`\`\`c fragment if it is a part):" >&2
      sed 's/^/  /' "$work/$n.out" >&2; bad=$((bad + 1))
    fi
    continue
  fi
  sed -E -i "s#(path: *\"?)[^\" ]*/([A-Za-z0-9_]+\.so)#\1$HANDLERS/\2#" "$work/$n.yaml"
  env=()
  while read -r var; do
    env+=("$var=$(value_for "$var")")
  done < <(grep -oE '\$\{[A-Za-z_][A-Za-z0-9_]*\}' "$work/$n.yaml" | tr -d '${}' | sort -u)
  if ! env "${env[@]}" "$DEDUPCTL" check --offline -c "$work/$n.yaml" >"$work/$n.out" 2>&1; then
    echo "$where: dedupctl check --offline refuses the config (mark it \`\`\`yaml fragment if it is a part):" >&2
    sed "s#$work/$n.yaml#$where (block)#; s/^/  /" "$work/$n.out" >&2; bad=$((bad + 1))
  fi
done <"$work/index"

[[ $checked -gt 0 ]] || { echo "doc_blocks.sh: no yaml or c block found: the check reads nothing" >&2; exit 2; }
if [[ $bad -gt 0 ]]; then
  echo "doc_blocks.sh: $bad of $checked blocks do not work as shown" >&2
  exit 1
fi
echo "doc_blocks.sh: $checked blocks (whole configs and handlers, and $(wc -l <"$work/verbatim") copies of files) work as shown"
