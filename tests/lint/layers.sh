#!/usr/bin/env bash
# tests/lint/layers.sh — the layers' seam with the database: src/core/ (the
# protocol) and src/base/ (what every layer uses) name no libpq symbol and
# include no libpq header. What the database is reached through lives in
# src/pg/ (the store), behind functions and enums.
#
#   tests/lint/layers.sh [ROOT]   ROOT: the source tree (default: this one)
#
# Exits 1 and names each file:line that crosses the seam.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

# libpq's functions (PQexec, PQcancel, ...), its types, its enums' values and
# its headers: comments count too (a comment naming PQfoo is code that knows it).
LIBPQ='\bPQ[A-Za-z_]+|\bPG(conn|result|cancel|notify|_DIAG_[A-Z_]+|RES_[A-Z_]+)\b'
LIBPQ+='|\b(ConnStatusType|ExecStatusType|PGTransactionStatusType|PGPing|PGVerbosity)\b'
LIBPQ+='|\bCONNECTION_(OK|BAD)\b|<(libpq-fe|libpq/[a-z_-]+|pg_config)\.h>'

# Files that may still name libpq, each with the reason. The lead moves
# src/base/version.c (the --version text's libpq version) out of base/ and
# removes its line here.
ALLOWED=(
  src/base/version.c
)

# The pattern must catch what it is for, or every tree passes.
for probe in 'PGconn *c;' '#include <libpq-fe.h>' 'PQtransactionStatus(c)' 'if (s == PGRES_TUPLES_OK)'; do
  if ! grep -qE "$LIBPQ" <<<"$probe"; then
    echo "layers.sh: the libpq pattern misses '$probe': fix the pattern" >&2
    exit 2
  fi
done

allowed() {
  local f
  for f in "${ALLOWED[@]}"; do [[ $1 == "$f" ]] && return 0; done
  return 1
}

found=0
cd "$ROOT"
for dir in src/core src/base; do
  [[ -d $dir ]] || { echo "layers.sh: no $dir under $ROOT" >&2; exit 2; }
done
while IFS= read -r hit; do
  file=${hit%%:*}
  allowed "$file" && continue
  echo "$hit"
  found=1
done < <(grep -rnE --include='*.c' --include='*.h' "$LIBPQ" src/core src/base || true)

if ((found)); then
  echo "layers.sh: src/core/ and src/base/ must not name libpq: give the store (src/pg/) an operation or an enum for it" >&2
  exit 1
fi
echo "layers.sh: src/core/ and src/base/ name no libpq symbol"
