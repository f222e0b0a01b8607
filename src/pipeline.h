/* pipeline: key → claim → handler → record → progress, one PostgreSQL transaction per batch. */
#ifndef DEDUPD_PIPELINE_H
#define DEDUPD_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "dedupd/handler.h"
#include "loader.h"
#include "store.h"

/*
 * The pipeline knows nothing of librdkafka: a source (the Kafka consumer
 * today) hands it batches of pl_msg and is told, after COMMIT, up to where
 * each partition may be acknowledged.
 */
struct pl_msg {
        const char *topic;
        int32_t partition;
        int64_t offset;
        int64_t timestamp_ms;
        const void *key;
        size_t key_len;
        const void *value;
        size_t value_len;
        struct dedupd_header *headers;
        size_t header_cnt;
        void *source; /* the source's own message, owned by the source */

        /* Pipeline state, kept across attempts of the same batch. */
        char *idem_key;     /* derived once */
        char fingerprint[65];
        char stored_fingerprint[65]; /* set when a duplicate's fingerprint differs */
        char *dlq_reason;   /* set: the message goes to the dead-letter topic */
        int derived;        /* the key was derived (or found underivable) */
        int dead_lettered;  /* the dead-letter write was acknowledged */
        int attempts;       /* handler RETRY results so far */
};

/** Free the pipeline's per-message state (not the message itself). */
void pl_msg_clear(struct pl_msg *m);

/** How the pipeline reaches the dead-letter topic. */
struct pl_dlq_ops {
        /** Write msgs (each with dlq_reason, idem_key possibly NULL) to the
         *  topic's dead-letter topic and return 0 only once the broker has
         *  acknowledged every one of them. */
        int (*dead_letter)(void *opaque, const char *dlq_topic, const char *ns,
                           struct pl_msg *const *msgs, size_t n, char *err, size_t errsz);
        void *opaque;
};

/** Where a partition may be acknowledged after a committed batch. */
struct pl_commit {
        const char *topic;
        int32_t partition;
        int64_t next_offset;
};

enum pl_rc {
        PL_OK = 0,
        PL_RETRY,      /* rolled back (handler RETRY, serialization, deadlock, SQL error): retry the batch */
        PL_DB_DOWN,    /* connection lost: nothing committed is known; reconnect, retry the batch */
        PL_DLQ_FAILED, /* dead-letter write not acknowledged: retry the batch */
};

struct pl_stats {
        uint64_t batches, consumed, applied, rejected, duplicates, dead_lettered, retries, mismatches;
};

struct pipeline;

/** Load and init every topic's handler (init gets a setup connection). */
struct pipeline *pipeline_new(const struct config *cfg, struct store *store, struct pl_dlq_ops ops,
                              char *err, size_t errsz) __attribute__((warn_unused_result));
void pipeline_free(struct pipeline *pl);

/**
 * Process one batch of one topic (messages in poll order: each partition's
 * in offset order). On PL_OK, commits[] holds one entry per partition of
 * the batch (caller provides room for n) and *ncommits their count.
 * On any other result *ncommits may still be > 0 (external mode, a partial
 * batch: see external.h): those commits are durable and are acknowledged,
 * and the same messages are passed again on the retry.
 */
enum pl_rc pipeline_process(struct pipeline *pl, size_t topic_idx, struct pl_msg *const *msgs,
                            size_t n, struct pl_commit *commits, size_t *ncommits, char *err,
                            size_t errsz);

const struct pl_stats *pipeline_stats(const struct pipeline *pl);

/**
 * Crash-loop guard, before a batch is processed: counts, in the database,
 * each batch start this process did not itself reach by committing (a
 * restart after a crash starts there again). A range that crashed once is
 * worked through one message at a time, each alone; a message whose crashes
 * (in batches, then alone, at least one alone) reach retry.max_crashes gets
 * its dlq_reason. Returns how many of msgs (a prefix) to process now.
 */
size_t pipeline_guard(struct pipeline *pl, size_t topic_idx, struct pl_msg *const *msgs, size_t n);

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
