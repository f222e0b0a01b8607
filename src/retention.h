/* retention: the end of a key's life — purge of expired keys, capacity plan; the retention rule topics.c checks against the broker. */
#ifndef DEDUPD_RETENTION_H
#define DEDUPD_RETENTION_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "store.h"

/** Without retention classes, progress_log rows are kept this long. */
#define RETENTION_PROGRESS_DEFAULT_MS (30LL * 86400000)

/** What one purge did (or, dry run, would do). */
struct purge_stats {
        int64_t responses;        /* responses dropped: response_expires_at passed */
        int64_t keys;             /* DONE/FAILED/EXPIRED keys deleted: expires_at passed */
        int64_t progress_rows;    /* progress_log rows older than progress_keep_ms deleted */
        int64_t pending_kept;     /* PENDING keys past expires_at, left alone */
        int64_t progress_keep_ms; /* the longest class's keep, or 30 days */
        int64_t statements;       /* batches run */
        int more;                 /* stopped by its time budget with work left */
};

/**
 * Purge the namespace by the database's clock, in statements of at most
 * batch rows (<= 0: cfg->purge_batch), each taking only rows nobody else
 * has locked (FOR UPDATE SKIP LOCKED): concurrent purgers neither wait for
 * each other nor delete a row twice. First drops responses past
 * response_expires_at (key and fingerprint stay), then deletes DONE, FAILED
 * and EXPIRED keys past expires_at — never a PENDING one, never a key
 * without expires_at — then progress_log rows older than the longest
 * class's keep. Returns 0, or -1 with a message (counts so far in st).
 */
int retention_purge(struct store *s, const struct config *cfg, int batch, struct purge_stats *st,
                    char *err, size_t errsz) __attribute__((warn_unused_result));

/** Dry run: count what retention_purge would take now. */
int retention_purge_count(struct store *s, const struct config *cfg, struct purge_stats *st,
                          char *err, size_t errsz) __attribute__((warn_unused_result));

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
 * Compare a class with a topic's retention (retention_ms -1: infinite;
 * cleanup_policy may be NULL). Returns 0 when the class keeps keys at least
 * as long as the topic keeps messages (or allow_shorter_than_topic is set),
 * -1 with a message saying which number is too small and by how much.
 */
int retention_compare(const char *topic, const struct retention_class *c, int64_t retention_ms,
                      const char *cleanup_policy, char *msg, size_t msgsz);

/* ---- capacity plan --------------------------------------------------------- */

/** The seed's estimate of a row: key + status + times. */
#define PLAN_DEFAULT_ROW_BYTES 100.0

/** rows = rate x keep, bytes = rows x row size (both rounded). Returns 0, or
 *  -1 when an input is negative or the result overflows. */
int plan_class(double rate_per_s, int64_t keep_ms, double row_bytes, uint64_t *rows,
               uint64_t *bytes);

/** "10000/s", "600000/min", "36000000/h" or "10000" (per second). Returns 0,
 *  or -1 with a message. */
int plan_parse_rate(const char *s, double *per_s, char *err, size_t errsz);

/** 1728000000 -> "1.73 billion"; 999 -> "999". */
const char *plan_human_count(uint64_t n, char *buf, size_t bufsz);
/** 172800000000 -> "173 GB" (decimal units, three significant digits). */
const char *plan_human_bytes(uint64_t n, char *buf, size_t bufsz);

/**
 * Print the plan of every retention class (and topics without one: kept
 * forever) at rate_per_s. The row size is measured from dedupd.keys when s
 * is connected and the table has rows, otherwise PLAN_DEFAULT_ROW_BYTES;
 * the output says which. Returns 0, or -1 with a message.
 */
int retention_plan(const struct config *cfg, struct store *s, double rate_per_s, FILE *out,
                   char *err, size_t errsz);

#endif
