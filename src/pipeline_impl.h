/* pipeline_impl: the pipeline's insides, shared by the transactional (pipeline.c) and external (external.c) paths. */
#ifndef DEDUPD_PIPELINE_IMPL_H
#define DEDUPD_PIPELINE_IMPL_H

#include "pipeline.h"

struct watchdog;

/* What this process knows of a partition, for the crash-loop guard. */
struct part_state {
        size_t topic_idx;
        int32_t partition;
        int64_t verified_next; /* next offset after this process's last commit, -1: none */
        int64_t counted_at;    /* a start this process counted and has not committed, -1: none */
        int counted_single;    /* ... counted as one message run alone */
        int64_t isolate_until; /* one message per batch below this offset */
        int had_attempts;      /* rows may exist in dedupd.attempts */
};

struct pipeline {
        const struct config *cfg;
        struct store *store;
        struct pl_dlq_ops ops;
        struct handler *handlers; /* one per topic */
        struct pl_stats stats;
        struct part_state *parts;
        size_t part_cnt;
        struct watchdog *watchdog; /* may be NULL */
        size_t outbox_pending;     /* rows written to the outbox since the relay last ran */
};


/** Derive key and fingerprint once per message (kept across attempts), and
 *  set dlq_reason for what cannot be processed (oversized, no key, retry
 *  budget spent). */
void pipeline_prepare(const struct topic_conf *t, struct pl_msg *m);

/** This process's state of a partition (created on first use; NULL when out of memory). */
struct part_state *pipeline_part_state(struct pipeline *pl, size_t topic_idx, int32_t partition);

/** After a COMMIT: fill commits[] from prog, add to the stats, remember each
 *  partition's verified position and forget its crash-loop ledger rows.
 *  Returns nprog. */
size_t pipeline_committed(struct pipeline *pl, size_t topic_idx, const struct store_progress *prog,
                          size_t nprog, struct pl_commit *commits);

/** Find or add the progress entry of a partition (p has room for one more). */
struct store_progress *pipeline_progress_of(struct store_progress *p, size_t *np, const char *topic,
                                            int32_t partition);

#endif
