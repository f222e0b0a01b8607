/* attempts: the crash-loop ledger in dedupd.attempts — batch starts that never committed, each row its owner's. */
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
 * held it before it was isolated. Every row belongs to the instance that
 * wrote it (`me`, an owner id): a row of a live instance other than me is a
 * peer's unfinished batch and counts for nothing here; a row whose owner is
 * no longer live (pg/instances.h) is a crash.
 */
/** What covers offset: the batch rows of owners no longer live whose range
 *  covers it — their starts (0: none), where the widest ends, their owner
 *  ids for the log — and how many live peers' rows cover it (not crashes). */
struct store_crashes {
        int crashes;
        int64_t until;
        char owners[256];
        int live;
        char live_owners[256];
};
enum store_rc store_attempt_covering(struct store *s, const char *ns, const char *topic, int32_t partition,
                                     int64_t offset, const char *me, struct store_crashes *out, char *err, size_t errsz)
        __attribute__((warn_unused_result));
/** Count a start of the batch [from, until) by me. */
enum store_rc store_attempt_batch(struct store *s, const char *ns, const char *topic, int32_t partition, int64_t from,
                                  int64_t until, const char *me, char *err, size_t errsz)
        __attribute__((warn_unused_result));
/** Count a start of the message at offset alone by me, taking over the
 *  single rows at offset of owners no longer live (their starts crashed).
 *  A new row inherits `inherited` crashes. Returns the starts alone (this
 *  one included) and the inherited count. */
enum store_rc store_attempt_single(struct store *s, const char *ns, const char *topic, int32_t partition,
                                   int64_t offset, int inherited, const char *me, int *attempts, int *inherited_out,
                                   char *err, size_t errsz) __attribute__((warn_unused_result));
/** Take back a start of mine that ended without a crash (a revocation, a clean stop). */
enum store_rc store_attempt_release(struct store *s, const char *ns, const char *topic, int32_t partition,
                                    int64_t offset, int single, const char *me, char *err, size_t errsz);
/** Forget the rows, mine or of owners no longer live, whose range is fully
 *  committed (below next_offset); a live peer's rows stay. */
enum store_rc store_attempts_done(struct store *s, const char *ns, const char *topic, int32_t partition,
                                  int64_t next_offset, const char *me, char *err, size_t errsz)
        __attribute__((warn_unused_result));

#endif
