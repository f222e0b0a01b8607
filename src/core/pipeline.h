/* pipeline: the protocol's front — each topic's handler and mode, the crash-loop guard before a batch, the books after. */
#ifndef DEDUPD_PIPELINE_H
#define DEDUPD_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "dedupd/handler.h"
#include "core/loader.h"
#include "pg/store.h"
#include "core/mode.h"
#include "core/source.h"

struct pipeline;
struct watchdog;

/** Load and init every topic's handler (init gets setup's connection);
 *  dead letters go through sink. No lane yet: add at least one. */
struct pipeline *pipeline_new(const struct config *cfg, struct store *setup, struct sink sink, char *err, size_t errsz)
        __attribute__((warn_unused_result));
void pipeline_free(struct pipeline *pl);

/**
 * A lane: batches on store's connection, watched by w (batch.timeout_ms;
 * may be NULL). One lane's batches run one at a time; different lanes' may
 * run at once on different threads (workers), sharing the handlers — only
 * when pipeline_concurrent() allows it. Returns the lane's index.
 */
size_t pipeline_add_lane(struct pipeline *pl, struct store *store, struct watchdog *w);
size_t pipeline_lanes(const struct pipeline *pl);
/** Topic topic_idx's handler (the reaper asks its reconcile()). */
struct handler *pipeline_handler(struct pipeline *pl, size_t topic_idx);
struct store *pipeline_lane_store(const struct pipeline *pl, size_t lane);

/** 0 when every topic (parallel_only: every topic with parallel.workers > 1)
 *  may run on several connections at once (transactional mode, a handler
 *  that declares DEDUPD_HANDLER_F_CONCURRENT); else -1 and why. */
int pipeline_concurrent(const struct pipeline *pl, int parallel_only, char *err, size_t errsz)
        __attribute__((warn_unused_result));

struct par_helper;
/** Lane's connections for parallel workers 2.. (core/parallel.h): n of
 *  them, owned by the caller, living as long as the pipeline. */
void pipeline_add_helpers(struct pipeline *pl, size_t lane, struct par_helper *helpers, size_t n);
/** How many such connections each lane needs: the most parallel.workers of any topic, less one. */
size_t pipeline_parallel_helpers(const struct config *cfg);

/**
 * Process one batch of one topic on a lane: first the crash-loop guard and
 * the splitter, which may take only a prefix of ents (*taken of them: a
 * range that crashed runs one message at a time; a batch that failed
 * without a message named is halved, split.h), then the topic's mode (see
 * struct mode) on that. PL_SPLIT: narrowed, retry at once. A partition's
 * batches always run on the same lane (its crash-loop state is the lane's).
 */
enum pl_rc pipeline_process(struct pipeline *pl, size_t lane, size_t topic_idx, struct pl_entry *const *ents, size_t n,
                            size_t *taken, struct pl_commit *commits, size_t *ncommits, char *err, size_t errsz);

/** After a lane's batch, on the thread that reads them: its counters and
 *  outbox rows become visible to pipeline_stats and pipeline_take_outbox. */
void pipeline_settle(struct pipeline *pl, size_t lane);

/** The settled counters of every lane. */
const struct pl_stats *pipeline_stats(const struct pipeline *pl);

/** How many outbox rows settled batches wrote since the last call (the relay should run). */
size_t pipeline_take_outbox(struct pipeline *pl);

/** A partition was revoked: the next batch from it is guarded again, and
 *  this process's uncommitted start of it is not counted as a crash. Every
 *  lane must be idle. */
void pipeline_forget(struct pipeline *pl, size_t topic_idx, int32_t partition);

/** A clean stop (every lane idle): no uncommitted start of this process counts as a crash. */
void pipeline_stop(struct pipeline *pl);

#endif
