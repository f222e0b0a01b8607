#!/usr/bin/env bash
# tests/lint/layers.sh — the layers' seams with the database and the brokers:
# src/core/ (the protocol) and src/base/ (what every layer uses) name no
# libpq symbol and no broker library's (librdkafka, rabbitmq-c, nats.c),
# include none of their headers, and include nothing of src/source/. What the
# database is reached through lives in src/pg/ (the store), behind functions
# and enums; what a broker is, in its folder under src/source/ (its plug-in).
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

# The brokers' client libraries: their functions, types, constants and
# headers, and the brokers' own folders.
BROKERS='\brd_kafka_[a-z_]+|\bRD_KAFKA_[A-Z_]+|<librdkafka/'
BROKERS+='|\bamqp_[a-z_]+\(|\bamqp_[a-z_]+_t\b|\bAMQP_[A-Z_]+|<amqp\.h>|<rabbitmq-c/'
BROKERS+='|\bnats[A-Z][A-Za-z]*|\bjs[A-Z][A-Za-z]+\b|\bjs_[A-Za-z]+|<nats/nats\.h>'
BROKERS+='|#include "source/'
LIBPQ+="|$BROKERS"

# Files that may still name one of them, each with the reason (none now).
ALLOWED=()

# The pattern must catch what it is for, or every tree passes.
for probe in 'PGconn *c;' '#include <libpq-fe.h>' 'PQtransactionStatus(c)' 'if (s == PGRES_TUPLES_OK)' \
        'rd_kafka_t *rk;' 'RD_KAFKA_RESP_ERR_NO_ERROR' 'amqp_basic_publish(c)' 'amqp_connection_state_t c;' \
        'natsConnection *nc;' 'jsCtx *js;' 'js_GetStreamInfo(x)' '#include "source/kafka/topics.h"'; do
  if ! grep -qE "$LIBPQ" <<<"$probe"; then
    echo "layers.sh: the libpq pattern misses '$probe': fix the pattern" >&2
    exit 2
  fi
done

allowed() {
  local f
  for f in "${ALLOWED[@]+"${ALLOWED[@]}"}"; do [[ $1 == "$f" ]] && return 0; done
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
  echo "layers.sh: src/core/ and src/base/ must not name libpq or a broker's library: give the store (src/pg/) an operation or an enum for it, or the broker's plug-in (src/source/plugin.h) a member" >&2
  exit 1
fi
echo "layers.sh: src/core/ and src/base/ name no libpq symbol and no broker's"
