/* guard: the crash-loop guard — counts batch starts that never committed, isolates the range, dead-letters the message that keeps crashing. */
#ifndef DEDUPD_CORE_GUARD_H
#define DEDUPD_CORE_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "core/mode.h"

/**
 * Before a batch is processed: counts, in the database, each batch start
 * this process did not itself reach by committing (a restart after a crash
 * starts there again), as this instance's (instance_owner). Rows of a live
 * peer are not crashes. A range that crashed once is worked through one
 * message at a time, each alone; a message whose crashes (in batches, then
 * alone, at least one alone) reach retry.max_crashes gets its dlq_reason.
 * Returns how many of ents (a prefix) to process now.
 */
size_t guard_batch_start(struct pl_topic *pt, struct pl_entry *const *ents, size_t n);

/** Partition ps committed up to next_offset in this process: its next
 *  batch continues from there unguarded, and the ledger forgets what the
 *  commit covers. */
void guard_committed(struct pl_topic *pt, struct part_state *ps, int64_t next_offset);

/** A start counted by this process ends without a crash (a revocation, a
 *  clean stop): taken back, so it brings nothing closer to a dead letter. */
void guard_release(struct pl_topic *pt, struct part_state *ps);

#endif
