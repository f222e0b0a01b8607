/* reconcile: the SQL behind reconcile() — the in-doubt keys due to be asked, and what the downstream's answer makes of one. */
#ifndef DEDUPD_PG_RECONCILE_H
#define DEDUPD_PG_RECONCILE_H

#include <stddef.h>
#include <stdint.h>

#include "pg/key_status.h"
#include "pg/store.h"

/** An EXPIRED key to ask about. */
struct store_in_doubt {
        char *key; /* owned: store_in_doubt_free */
        int32_t partition;
        int64_t offset;
        int attempts;
        int reconciled; /* earlier answers that could not tell */
};

/**
 * At most `limit` EXPIRED keys of topic that were asked fewer than
 * max_tries times, the longest untouched first (an answer that could not
 * tell moves a key to the back). *rows is allocated (store_in_doubt_free).
 */
enum store_rc store_in_doubt_due(struct store *s, const char *ns, const char *topic, int max_tries, int limit,
                                 struct store_in_doubt **rows, size_t *n, char *err, size_t errsz)
        __attribute__((warn_unused_result));

void store_in_doubt_free(struct store_in_doubt *rows, size_t n);

/**
 * Record the downstream's answer on an EXPIRED key, compare-and-set (only
 * while it is still EXPIRED: *changed = 0 when someone else moved it):
 * KEY_DONE or KEY_FAILED with its response; KEY_PENDING (re-execute) with
 * its lease run out, so its next message takes it over and runs the effect;
 * KEY_EXPIRED (could not tell) counts the try and leaves it as it is.
 */
enum store_rc store_reconciled(struct store *s, const char *ns, const char *key, enum key_status to,
                               const char *response, int *changed, char *err, size_t errsz)
        __attribute__((warn_unused_result));

#endif
