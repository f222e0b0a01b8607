/* mismatches: dedupd.mismatches — each record whose key was stored with another payload's fingerprint
 * (written here; read by the tools in pg/audit). */
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
        int dead_lettered;               /* fingerprint.on_mismatch: dead-letter (else absorbed) */
};

/** Record it, in the caller's transaction (a batch's: rolled back with it);
 *  the same record again (a redelivery, a replay) is recorded once. */
enum store_rc store_mismatch_note(struct store *s, const char *ns, const struct store_mismatch *m, char *err,
                                  size_t errsz) __attribute__((warn_unused_result));

#endif
