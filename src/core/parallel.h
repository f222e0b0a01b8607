/* parallel: parallel keys inside a partition — a batch split by a key onto workers, each on its own connection and in its own transaction; the partition moves on once every worker committed. */
#ifndef DEDUPD_CORE_PARALLEL_H
#define DEDUPD_CORE_PARALLEL_H

#include <stddef.h>

#include "core/mode.h"

/** A connection and a watchdog a lane lends its parallel workers 2.. (worker 1 is the lane's own). */
struct par_helper {
        struct store *store;
        struct watchdog *wd;
};

/**
 * Topic pt's batch (parallel.workers > 1) split by hash(parallel.key) onto
 * the workers, each sub-batch run by mode on a thread, a connection and in
 * a transaction of its own, in offset order (same key, same worker). Each
 * worker's transaction writes its position in every partition of the batch
 * (pg/parallel_positions.h). Once every worker committed, the partitions'
 * positions are moved in dedupd.offsets (and the gap check made) in a
 * statement of the lane's connection, and commits[] say where they may be
 * acknowledged; otherwise nothing is acknowledged, the worst result is
 * returned, and the retry finds what committed already claimed (absorbed).
 * helpers: at least workers - 1. A message without the key is dead-lettered.
 */
enum pl_rc parallel_process(struct pl_topic *pt, const struct mode *mode, const struct par_helper *helpers,
                            size_t nhelpers, struct pl_entry *const *ents, size_t n, struct pl_commit *commits,
                            size_t *ncommits, char *err, size_t errsz);

/** The worker a message goes to: FNV-1a of its parallel key, modulo workers. */
int parallel_worker_of(const char *key, int workers);

#endif
