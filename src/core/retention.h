/* retention: when keys, progress rows and sent outbox rows may go, the daemon's purge schedule, and the rule a class must keep against its topic. */
#ifndef DEDUPD_RETENTION_H
#define DEDUPD_RETENTION_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/config.h"
#include "pg/purge.h"
#include "pg/store.h"

/** Without retention classes, progress_log rows are kept this long. */
#define RETENTION_PROGRESS_DEFAULT_MS (30LL * 86400000)

/**
 * Purge the namespace by the database's clock, in statements of at most
 * batch rows (<= 0: cfg->purge_batch), each taking only rows nobody else
 * has locked (pg/purge.h skips locked rows): concurrent purgers neither wait for
 * each other nor delete a row twice. First drops responses past
 * response_expires_at (key and fingerprint stay), then deletes DONE, FAILED
 * and EXPIRED keys past expires_at — never a PENDING one, never a key
 * without expires_at — then progress_log rows older than the longest
 * class's keep, then outbox rows sent more than outbox.keep ago (never an
 * unsent or given-up one). Returns 0, or -1 with a message (counts so far
 * in st).
 */
int retention_purge(struct store *s, const struct config *cfg, int batch, struct purge_stats *st, char *err,
                    size_t errsz) __attribute__((warn_unused_result));

/** Dry run: count what retention_purge would take now. */
int retention_purge_count(struct store *s, const struct config *cfg, struct purge_stats *st, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/**
 * The daemon's hook, called from the consumer loop between batches: purges
 * every cfg->purge_interval_ms (0: never), at most about half a second of
 * work at a time so consuming never stalls; logs a summary at INFO when
 * anything went, failures at WARN (rate-limited).
 */
void retention_tick(struct store *s, const struct config *cfg, int64_t now_ms);

/** How long progress_log rows are kept: the longest class's keep, or 30 days. */
int64_t retention_progress_keep_ms(const struct config *cfg);

/* ---- topic retention check ---------------------------------------------- */

/**
 * What holds the messages, in the broker's words: kind "topic", "stream" or
 * "queue"; its name; setting, how the broker states its retention, shown in
 * parentheses ("retention.ms=604800000", "max_age 7d", "message TTL 7d").
 */
struct retention_holder {
        const char *kind;
        const char *name;
        const char *setting;
};

/**
 * Compare a class with what h keeps (retention_ms -1: for ever;
 * cleanup_policy, Kafka's, may be NULL). Returns 0 when the class keeps keys
 * at least as long as h keeps messages (or allow_shorter_than_topic is set),
 * -1 with a message saying which number is too small and by how much.
 */
int retention_compare(const struct retention_holder *h, const struct retention_class *c, int64_t retention_ms,
                      const char *cleanup_policy, char *msg, size_t msgsz);

#endif
