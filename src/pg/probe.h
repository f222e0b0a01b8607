/* probe: whether an idle connection still reaches its server — a bounded SELECT 1 that never blocks the loop for long. */
#ifndef DEDUPD_PG_PROBE_H
#define DEDUPD_PG_PROBE_H

#include <stddef.h>

#include "pg/store.h"

/** While the connection is idle nothing else notices a server that went
 *  away: STORE_OK when it answers SELECT 1 within timeout_ms, else what
 *  failed (STORE_CONN for a closed connection or no answer in time, which
 *  leaves the connection to be replaced). A connection in a transaction is
 *  in use and not probed (STORE_OK). */
enum store_rc store_probe(struct store *s, int timeout_ms, char *err, size_t errsz) __attribute__((warn_unused_result));

#endif
