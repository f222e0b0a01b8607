/* external: external-effect mode (docs/design.md §6) — claim PENDING with a lease, run the effect, finish fenced by owner; the reaper. */
#ifndef DEDUPD_EXTERNAL_H
#define DEDUPD_EXTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "pg/store.h"

/*
 * External mode is mode_external (core/mode.h). There is no batch
 * transaction: each fresh message is claimed, handled and finished on its
 * own, in partition-offset order, on dedupd's connection in autocommit.
 *
 * Partial batches. A message that cannot be finished now — its key is
 * PENDING under another owner's live lease, the handler asked to RETRY, a
 * dead letter was not acknowledged, the database went away — stops its
 * partition for this call; the other partitions go on. Whatever was
 * finished before it is then made durable (dedupd.offsets) and returned in
 * commits[] even though the result is not PL_OK: the source acknowledges
 * those commits and later calls again with the same messages. Messages
 * below a partition's committed position (this process's own, since the
 * partition was assigned) are skipped on that call, not processed or
 * counted twice.
 */

/**
 * The reaper, called from the consumer's loop between batches; it does its
 * work at most every few seconds. Marks PENDING keys whose lease ran out more
 * than `external.expire_after` ago EXPIRED (in doubt), in small batches, and
 * logs how many at WARN; then, for a topic whose handler has reconcile()
 * (pl's), asks it about EXPIRED keys (core/reconcile.h).
 */
struct pipeline;
void external_reap_tick(const struct config *cfg, struct store *s, struct pipeline *pl, int64_t now_ms);

/** This process's owner id (instance_owner: one id for its leases and its crash-loop ledger rows). */
const char *external_owner(void);

/** What external mode saw since start (all topics). */
struct external_stats {
        uint64_t claimed;        /* keys claimed fresh */
        uint64_t taken_over;     /* expired leases (or own interrupted attempts) taken over */
        uint64_t lease_waits;    /* messages that met a live lease and backed off */
        uint64_t lost_leases;    /* finishes that found another owner: effect possibly twice */
        uint64_t expired_reaped; /* PENDING keys the reaper marked EXPIRED */
        uint64_t expired_dead_lettered, expired_skipped, expired_reexecuted;
};
const struct external_stats *external_stats(void);

#endif
