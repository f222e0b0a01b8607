#!/usr/bin/env bash
# tests/lint/config_reference.sh DEDUPCTL ROOT — docs/configuration.md is what
# the configuration table prints (dedupctl help-config --markdown): a setting
# added, changed or removed without regenerating the reference fails here.
#   regenerate: build/dedupctl help-config --markdown > docs/configuration.md
set -euo pipefail
DEDUPCTL=$1 ROOT=$2
want=$(mktemp)
trap 'rm -f "$want"' EXIT
"$DEDUPCTL" help-config --markdown >"$want"
grep -q '^| `namespace` |' "$want" || { echo "config_reference.sh: dedupctl printed no reference" >&2; exit 2; }
if ! diff -u "$ROOT/docs/configuration.md" "$want"; then
  echo "config_reference.sh: docs/configuration.md differs from the configuration table: regenerate it with" \
       "'dedupctl help-config --markdown > docs/configuration.md'" >&2
  exit 1
fi
echo "config_reference.sh: docs/configuration.md is the table's"
