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

/** Load and init every topic's handler (init gets a setup connection);
 *  dead letters go through sink. */
struct pipeline *pipeline_new(const struct config *cfg, struct store *store, struct sink sink, char *err,
                              size_t errsz) __attribute__((warn_unused_result));
void pipeline_free(struct pipeline *pl);

/**
 * Process one batch of one topic: first the crash-loop guard and the
 * splitter, which may take only a prefix of msgs (*taken of them: a range
 * that crashed runs one message at a time; a batch that failed without a
 * message named is halved, split.h), then the topic's mode (see struct
 * mode) on that. PL_SPLIT: narrowed, retry at once.
 */
enum pl_rc pipeline_process(struct pipeline *pl, size_t topic_idx, struct pl_msg *const *msgs, size_t n,
                            size_t *taken, struct pl_commit *commits, size_t *ncommits, char *err, size_t errsz);

const struct pl_stats *pipeline_stats(const struct pipeline *pl);

struct watchdog;
/** Watch every batch transaction with w (batch.timeout_ms). */
void pipeline_set_watchdog(struct pipeline *pl, struct watchdog *w);

/** How many outbox rows committed batches wrote since the last call (the relay should run). */
size_t pipeline_take_outbox(struct pipeline *pl);

/** A partition was revoked: the next batch from it is guarded again, and
 *  this process's uncommitted start of it is not counted as a crash. */
void pipeline_forget(struct pipeline *pl, size_t topic_idx, int32_t partition);

/** A clean stop: no uncommitted start of this process counts as a crash. */
void pipeline_stop(struct pipeline *pl);

#endif
