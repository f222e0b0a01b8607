/* outbox_admin: the operator's statements on dedupd.outbox — what waits or was given up, given-up rows put back for the relay or dropped. */
#ifndef DEDUPD_PG_OUTBOX_ADMIN_H
#define DEDUPD_PG_OUTBOX_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "pg/store.h"

/**
 * Given-up rows of ns (and, with unsent, the rows still waiting to be
 * published too), oldest first, at most limit: id, state (given up,
 * backoff, waiting), topic, key (the idempotency key that emitted it),
 * failures, reason (the last failure), created, given_up_at, retry_at.
 * *out to be PQclear'ed.
 */
enum store_rc store_outbox_list(struct store *s, const char *ns, int unsent, int limit, PGresult **out, char *err,
                                size_t errsz) __attribute__((warn_unused_result));

/** Rows of ns given up, and rows still waiting (not given up, not sent). */
enum store_rc store_outbox_counts(struct store *s, const char *ns, int64_t *given_up, int64_t *waiting, char *err,
                                  size_t errsz) __attribute__((warn_unused_result));

/**
 * Put given-up rows of ns back for the relay (given_up_at, failures and
 * retry_at cleared; last_error kept until the next attempt says otherwise):
 * those of ids, or every one when ids is NULL. *done (free it) gets the ids
 * put back, in order.
 */
enum store_rc store_outbox_retry(struct store *s, const char *ns, const int64_t *ids, size_t nids, int64_t **done,
                                 size_t *ndone, char *err, size_t errsz) __attribute__((warn_unused_result));

/** Delete given-up rows of ns (never an unsent or sent one), as store_outbox_retry chooses them. */
enum store_rc store_outbox_drop(struct store *s, const char *ns, const int64_t *ids, size_t nids, int64_t **done,
                                size_t *ndone, char *err, size_t errsz) __attribute__((warn_unused_result));

#endif
