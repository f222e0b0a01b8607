/* mode: how one topic's batch is applied — the interface of the transactional and external modes, and what they work with. */
#ifndef DEDUPD_CORE_MODE_H
#define DEDUPD_CORE_MODE_H

#include <stddef.h>

#include "base/config.h"
#include "core/loader.h"
#include "core/msg_state.h"
#include "core/partstate.h"
#include "core/source.h"
#include "pg/store.h"

enum pl_rc {
        PL_OK = 0,
        PL_RETRY,      /* rolled back (handler RETRY, serialization, deadlock, SQL error): retry the batch */
        PL_DB_DOWN,    /* connection lost: nothing committed is known; reconnect, retry the batch */
        PL_DLQ_FAILED, /* dead-letter write not acknowledged: retry the batch */
        PL_SPLIT,      /* rolled back: a message of the batch, not known which, made it fail (a value one of
                        * dedupd's own statements refused, a handler that broke the transaction): split.c
                        * narrows the batch to find it; the narrower retry runs at once */
        PL_REPOSITION, /* nothing written: the database is behind what this process committed for a partition
                        * (it changed under dedupd: a failover, a restore); re-position from it, then retry */
};

struct pl_stats {
        uint64_t batches, consumed, applied, rejected, duplicates, dead_lettered, retries, mismatches;
};

struct watchdog;

/** A parallel worker's sub-batch (core/parallel.h): which worker, and the
 *  whole batch's partitions (from_offset its first offset, next_offset the
 *  one after its last), which the worker's position is written for. */
struct par_sub {
        int worker;
        const char *layout;
        const struct store_progress *span;
        size_t nspan;
};

/** One topic in the pipeline: everything its mode works with. */
struct pl_topic {
        const struct config *cfg;
        const struct topic_conf *t;
        size_t topic_idx;
        struct store *store;
        const struct sink *sink;
        struct handler *handler;
        struct watchdog *watchdog; /* may be NULL */
        struct pl_stats *stats;
        struct part_states *parts;
        size_t *outbox_pending;    /* rows written to the outbox since the relay last ran */
        int64_t *optimistic_after; /* txn.c: claims pessimistically until then (log_now_ms()), after contention;
                                      the topic's, shared by every lane (read and written atomically) */
        int contention_streak;     /* invoke.c: attempts in a row a handler's deadlock or serialization failure ended */
        const struct par_sub *par; /* a parallel worker's sub-batch; NULL: a whole batch */
        char ctx[200];             /* "topic:<name>", the log context */
};

/**
 * A mode processes one batch (messages in poll order: each partition's in
 * offset order). On PL_OK, commits[] holds one entry per partition of the
 * batch (room for n) and *ncommits their count. On any other result
 * *ncommits may still be > 0 (external mode, a partial batch): those
 * commits are durable and are acknowledged, and the same messages are
 * passed again on the retry.
 */
struct mode {
        const char *name;
        enum pl_rc (*process)(struct pl_topic *pt, struct pl_entry *const *ents, size_t n, struct pl_commit *commits,
                              size_t *ncommits, char *err, size_t errsz);
};

/** docs/design.md §5: one batch, one transaction (txn.c). */
extern const struct mode mode_transactional;
/** docs/design.md §6: claim with a lease, run, finish fenced by owner (external.c). */
extern const struct mode mode_external;

#endif
