/* provenance: where absorbed duplicates come from — a deterministic sample of each committed batch's duplicates, buffered and written off the batch's path, then counted. */
#ifndef DEDUPD_CORE_PROVENANCE_H
#define DEDUPD_CORE_PROVENANCE_H

#include <stddef.h>
#include <stdint.h>

#include "core/batch.h"
#include "core/mode.h"

/** Whether the duplicate at (key, partition, offset) is one of the one in
 *  `every` recorded: a hash of the three, so a retried or replayed batch
 *  samples the same messages. 0: none. */
int provenance_sampled(int every, const char *key, int32_t partition, int64_t offset);

/**
 * After a batch committed: its absorbed duplicates (ITEM_REPEAT,
 * ITEM_KNOWN) that the topic's provenance.every samples, with
 * provenance.header's value, go to a buffer the runner writes (any lane's
 * thread may call it). At most PROVENANCE_BUFFER_MAX wait; past that a
 * sample is dropped (it is a sample).
 */
#define PROVENANCE_BUFFER_MAX 10000
void provenance_collect(const struct pl_topic *pt, const struct batch *b);

/**
 * Between batches (the runner's connection, idle): what the buffer holds
 * written to dedupd.duplicates in one statement, each row with the first
 * delivery it repeats (pg/duplicates.h), and counted
 * (dedupd_duplicates_sampled_total, dedupd_duplicate_delay_seconds) — at
 * most once a second unless force or the buffer is half full. A failed
 * write drops the rows, with a warning: they are a sample, and the
 * duplicates themselves were absorbed and counted.
 */
void provenance_flush(struct store *s, const char *ns, int64_t now_ms, int force);

/** The buffer emptied (at exit). */
void provenance_discard(void);

#endif
