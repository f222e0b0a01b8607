/* mismatches: dedupd.mismatches — each record whose key was stored with another payload's fingerprint. */
#ifndef DEDUPD_PG_MISMATCHES_H
#define DEDUPD_PG_MISMATCHES_H

#include <stddef.h>
#include <stdint.h>

#include "pg/store.h"

/** One record whose payload's fingerprint differs from its key's first one. */
struct store_mismatch {
        const char *key, *topic;
        int32_t partition;
        int64_t offset;
        const char *first, *fingerprint; /* hex SHA-256 */
        int dead_lettered;                /* fingerprint.on_mismatch: dead-letter (else absorbed) */
};

/** Record it, in the caller's transaction (a batch's: rolled back with it);
 *  the same record again (a redelivery, a replay) is recorded once. */
enum store_rc store_mismatch_note(struct store *s, const char *ns, const struct store_mismatch *m, char *err,
                                  size_t errsz) __attribute__((warn_unused_result));

/** How many the namespace holds and the newest `examples` of them: one row
 *  with the count (column 0), then a row per example (key, topic, partition,
 *  offset, "absorbed at TIME" or "dead-lettered at TIME"); the caller PQclears both. */
enum store_rc store_mismatch_summary(struct store *s, const char *ns, int examples, PGresult **count,
                                     PGresult **rows, char *err, size_t errsz) __attribute__((warn_unused_result));

#endif
