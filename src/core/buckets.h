/* buckets: under keys.layout: partitioned, the bucket a message's key belongs to (bucket_from, or its timestamp), what is too old or too far ahead to prove, and the partitions made ahead of it and dropped behind it. */
#ifndef DEDUPD_CORE_BUCKETS_H
#define DEDUPD_CORE_BUCKETS_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/record.h"
#include "core/msg_state.h"
#include "pg/store.h"

/**
 * Put the message's bucket before its keys ("@2026-12-01|" + idem_key,
 * key_text and key.previous's key); with no bucket_from, the message's
 * timestamp's bucket, and when that is within keys.skew of the bucket's
 * start, the key in the bucket before as st->prev_key (a resend of it
 * across midnight). 0; or 1 with why set (malloc'd) when the message is
 * to be dead-lettered: no time, too far ahead, or too old to prove. No-op
 * under keys.layout: heap.
 */
int buckets_key(const struct config *cfg, const struct topic_conf *t, const struct pl_msg *m, const struct record *in,
                struct pl_state *st, char **why);

/** How long a partition is kept after its bucket ends: the longest keep of
 *  the topics' classes, plus keys.skew. */
int64_t buckets_keep_ms(const struct config *cfg);

/** The first bucket day still provable at now_ms: a later one than every
 *  dropped bucket, whose end is less than buckets_keep_ms ago. */
int64_t buckets_horizon(const struct config *cfg, int64_t now_ms);

/** How many partitions are kept at now_ms: from the horizon through skew and
 *  one bucket ahead. */
int64_t buckets_live(const struct config *cfg, int64_t now_ms);

/**
 * At start, before the first batch: refuse a namespace whose keys are in the
 * other layout's table (the claim would not find them: every duplicate would
 * run again), then make the partitions from the horizon to keys.skew and a
 * bucket ahead and read which buckets were dropped. 0, or -1 with err.
 * No-op under keys.layout: heap but for the refusal.
 */
int buckets_prepare(struct store *s, const struct config *cfg, char *err, size_t errsz);

/** Between batches: every 10 minutes, the buckets another instance dropped
 *  read and the partitions ahead made (a failure logged at WARN, retried
 *  next tick). */
void buckets_tick(struct store *s, const struct config *cfg, int64_t now_ms);

/** Drop every partition whose bucket ended more than buckets_keep_ms ago, a
 *  statement each (none while deadline_ms, log_now_ms's clock, has passed;
 *  0: none); counts into *partitions and *rows. 0, or -1 with err. */
int buckets_drop_expired(struct store *s, const struct config *cfg, int64_t deadline_ms, int64_t *partitions,
                         int64_t *rows, char *err, size_t errsz);

/** Dry run: how many partitions buckets_drop_expired would drop now. */
int buckets_count_expired(struct store *s, const struct config *cfg, int64_t *partitions, char *err, size_t errsz);

#endif
