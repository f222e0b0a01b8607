/* gauges: what the operator's gauges read from the database — PENDING keys, the outbox backlog and its given-up rows. */
#ifndef DEDUPD_PG_GAUGES_H
#define DEDUPD_PG_GAUGES_H

#include <stdint.h>

#include "pg/store.h"

struct store_gauges {
        int64_t pending;         /* keys in PENDING */
        double pending_oldest_s; /* age of the oldest, 0 when none */
        int64_t outbox_unsent;   /* outbox rows not yet published, given-up ones not counted */
        int64_t outbox_given_up; /* outbox rows given up (dedupctl outbox retry) */
};

/** One statement, by the partial indexes on PENDING keys and unsent and given-up outbox rows. */
enum store_rc store_read_gauges(struct store *s, const char *ns, struct store_gauges *g, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** Unsent outbox rows of the namespace that are not given up, counted up to `upto` (limits.outbox_backlog): cheap however far behind. */
enum store_rc store_outbox_backlog(struct store *s, const char *ns, int64_t upto, int64_t *unsent, char *err,
                                   size_t errsz) __attribute__((warn_unused_result));

#endif
