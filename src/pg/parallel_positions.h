/* parallel_positions: each parallel worker's position in dedupd.parallel_positions, and a partition's position recovered from them. */
#ifndef DEDUPD_PG_PARALLEL_POSITIONS_H
#define DEDUPD_PG_PARALLEL_POSITIONS_H

#include <stddef.h>
#include <stdint.h>

#include "pg/store.h"

/*
 * A worker's row (namespace, topic, partition, layout, worker) says: every
 * message of that partition with an offset below next_offset that the
 * layout ("<workers>:<key template>") sends to this worker is done. It is
 * written in the worker's own transaction, beside its effects. The
 * partition's position in dedupd.offsets moves only once every worker
 * committed; after a crash in between it is recovered as the least of the
 * layout's rows, when each of its workers has one.
 */

/** In the caller's transaction: worker's rows of topic's partitions parts[i]
 *  moved up to next[i] (never backwards). */
enum store_rc store_parallel_mark(struct store *s, const char *ns, const char *topic, const char *layout, int worker,
                                  size_t n, const int32_t *parts, const int64_t *next, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** Statement of its own: each partition of topic whose every worker (of
 *  workers, under layout) has a row is moved up in dedupd.offsets to the
 *  least of them; *moved says how many. */
enum store_rc store_parallel_resume(struct store *s, const char *ns, const char *topic, const char *layout, int workers,
                                    size_t *moved, char *err, size_t errsz) __attribute__((warn_unused_result));

#endif
