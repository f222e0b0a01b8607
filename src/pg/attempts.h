/* attempts: the crash-loop ledger in dedupd.attempts — batch starts that never committed. */
#ifndef DEDUPD_PG_ATTEMPTS_H
#define DEDUPD_PG_ATTEMPTS_H

#include <stddef.h>
#include <stdint.h>

#include "pg/store.h"

/*
 * Crash-loop ledger, written in autocommit before a batch's handlers run, so
 * the count survives the crash it counts. A batch row counts the starts of
 * the range [offset, until) of a partition; a single row counts the starts
 * of one message run alone, and `inherited` the crashes of the batches that
 * held it before it was isolated.
 */
/** The batch row whose range covers offset, if any (*found 0 or 1). */
enum store_rc store_attempt_covering(struct store *s, const char *ns, const char *topic, int32_t partition,
                                     int64_t offset, int *found, int *attempts, int64_t *until, char *err,
                                     size_t errsz) __attribute__((warn_unused_result));
/** Count a start of the batch [from, until); *attempts is the count after it. */
enum store_rc store_attempt_batch(struct store *s, const char *ns, const char *topic, int32_t partition,
                                  int64_t from, int64_t until, int *attempts, char *err, size_t errsz)
        __attribute__((warn_unused_result));
/** Count a start of the message at offset alone; a new row inherits
 *  `inherited` crashes. Returns the starts alone and the inherited count. */
enum store_rc store_attempt_single(struct store *s, const char *ns, const char *topic, int32_t partition,
                                   int64_t offset, int inherited, int *attempts, int *inherited_out,
                                   char *err, size_t errsz) __attribute__((warn_unused_result));
/** Take back a counted start that ended without a crash (a revocation, a clean stop). */
enum store_rc store_attempt_release(struct store *s, const char *ns, const char *topic, int32_t partition,
                                    int64_t offset, int single, char *err, size_t errsz);
/** Forget attempts whose range is fully committed (below next_offset). */
enum store_rc store_attempts_done(struct store *s, const char *ns, const char *topic,
                                  int32_t partition, int64_t next_offset, char *err, size_t errsz) __attribute__((warn_unused_result));

#endif
