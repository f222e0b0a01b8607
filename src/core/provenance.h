/* provenance: where absorbed duplicates come from — a deterministic sample of a batch's duplicates recorded in its transaction, counted once it committed. */
#ifndef DEDUPD_CORE_PROVENANCE_H
#define DEDUPD_CORE_PROVENANCE_H

#include <stddef.h>
#include <stdint.h>

#include "core/batch.h"
#include "core/mode.h"

/** What one batch recorded, to be counted after its COMMIT. */
struct provenance {
        struct prov_seen *seen;
        size_t n, cap;
};

/** Whether the duplicate at (key, partition, offset) is one of the one in
 *  `every` recorded: a hash of the three, so a retried or replayed batch
 *  samples the same messages. 0: none. */
int provenance_sampled(int every, const char *key, int32_t partition, int64_t offset);

/**
 * The batch's absorbed duplicates (ITEM_REPEAT, ITEM_KNOWN) that the
 * topic's provenance.every samples, written in its open transaction with
 * provenance.header's value (pg/duplicates.h); what was written is kept in
 * p (emptied first). No statement when none is sampled.
 */
enum store_rc provenance_note(const struct pl_topic *pt, const struct batch *b, struct provenance *p, char *err,
                              size_t errsz) __attribute__((warn_unused_result));

/** After COMMIT: what p holds counted (dedupd_duplicates_sampled_total,
 *  dedupd_duplicate_delay_seconds), then emptied. */
void provenance_count(struct provenance *p);

void provenance_free(struct provenance *p);

#endif
