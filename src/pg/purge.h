/* purge: the statements that end a key's life — expired responses, expired keys, old progress, sent outbox rows — and the table's size. */
#ifndef DEDUPD_PG_PURGE_H
#define DEDUPD_PG_PURGE_H

#include <stddef.h>
#include <stdint.h>

struct store;

/** What one purge did (or, counted, would do). */
struct purge_stats {
        int64_t responses;        /* responses dropped: response_expires_at passed */
        int64_t keys;             /* DONE/FAILED/EXPIRED keys deleted: expires_at passed */
        int64_t progress_rows;    /* progress_log rows older than progress_keep_ms deleted */
        int64_t mismatch_rows;    /* dedupd.mismatches rows as old, deleted with them */
        int64_t duplicate_rows;   /* dedupd.duplicates rows (sampled provenance) as old, deleted with them */
        int64_t pending_kept;     /* PENDING keys past expires_at, left alone */
        int64_t progress_keep_ms; /* how old a progress_log row must be to go */
        int64_t outbox_rows;      /* sent outbox rows deleted: sent longer than outbox_keep_ms ago */
        int64_t outbox_keep_ms;   /* 0: sent outbox rows are kept */
        int64_t partitions;       /* keys.layout: partitioned — buckets' partitions dropped whole */
        int64_t partition_keys;   /* the keys they held */
        int64_t statements;       /* batches run */
        int more;                 /* stopped by its deadline with work left */
};

/**
 * Purge namespace ns by the database's clock, in statements of at most
 * batch rows, each taking only rows nobody else has locked (FOR UPDATE SKIP
 * LOCKED): concurrent purgers neither wait for each other nor delete a row
 * twice. First responses past response_expires_at (key and fingerprint
 * stay), then DONE, FAILED and EXPIRED keys past expires_at — never a
 * PENDING one, never a key without expires_at — then progress_log rows older
 * than progress_keep_ms, then outbox rows sent more than outbox_keep_ms ago
 * (0: none; never an unsent or given-up row). Stops when deadline_ms
 * (log_now_ms clock) passes, with st->more set; deadline_ms 0: no deadline,
 * and pending_kept counted. Returns 0, or -1 with a message (counts so far
 * in st).
 */
int store_purge(struct store *s, const char *ns, int batch, int64_t progress_keep_ms, int64_t outbox_keep_ms,
                int64_t deadline_ms, struct purge_stats *st, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** Count what store_purge would take now. */
int store_purge_count(struct store *s, const char *ns, int64_t progress_keep_ms, int64_t outbox_keep_ms,
                      struct purge_stats *st, char *err, size_t errsz) __attribute__((warn_unused_result));

/** How large dedupd.keys is (table, indexes and TOAST). */
struct keys_size {
        int exists;          /* the table exists */
        int64_t total_bytes; /* pg_total_relation_size */
        int64_t rows;        /* all namespaces: counted, or ANALYZE's estimate past a million */
        int64_t ns_rows;     /* of ns, -1 when not counted */
};
int store_keys_size(struct store *s, const char *ns, struct keys_size *ks, char *err, size_t errsz)
        __attribute__((warn_unused_result));

#endif
