/* store: everything dedupd says to PostgreSQL — schema migrations, claims, outcomes, offsets. */
#ifndef DEDUPD_STORE_H
#define DEDUPD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

/** How a failed statement should be treated. */
enum store_rc {
        STORE_OK = 0,
        STORE_RETRY, /* serialization failure, deadlock, lock timeout: roll back, retry */
        STORE_CONN,  /* connection lost or server shutting down: reconnect, retry */
        STORE_ERROR, /* anything else: roll back, log, retry with backoff */
};

struct store {
        PGconn *conn;
        char *conninfo;
        int idle_tx_timeout_ms; /* idle_in_transaction_session_timeout; 0: 60 s */
        char target[160]; /* "host:port/db" for logs: never the conninfo (secrets) */
};

/** Connect (does not log the conninfo). */
enum store_rc store_connect(struct store *s, const char *conninfo, char *err, size_t errsz);
void store_close(struct store *s);
/** 1 when the connection is usable. */
int store_ok(const struct store *s);

/** Apply the numbered schema migrations not yet applied (idempotent,
 *  serialised by an advisory lock so concurrent starters are safe). */
enum store_rc store_migrate(struct store *s, char *err, size_t errsz);
/** Highest applied and highest known migration. */
int store_schema_version(struct store *s, int *applied, int *known, char *err, size_t errsz);

enum store_rc store_exec(struct store *s, const char *sql, char *err, size_t errsz);
/** A parameterised statement (all parameters text). On success *out (when
 *  out is not NULL) holds the result, to be PQclear'ed by the caller. */
enum store_rc store_query(struct store *s, const char *sql, int nparams, const char *const *params,
                          PGresult **out, char *err, size_t errsz);
enum store_rc store_begin(struct store *s, char *err, size_t errsz);
enum store_rc store_commit(struct store *s, char *err, size_t errsz);
void store_rollback(struct store *s);

/** Fold a libpq message onto one line, in place. */
void store_one_line(char *msg);

/** Classify a failed result (or a NULL result) on conn. */
enum store_rc store_classify(PGconn *conn, const PGresult *res);

/** A PostgreSQL array literal built element by element (NULL-able). */
struct store_array {
        char *p;
        size_t len, cap;
        size_t cnt;
};
void store_array_text(struct store_array *a, const char *s); /* s may be NULL */
void store_array_int(struct store_array *a, int64_t v);
const char *store_array_finish(struct store_array *a);
void store_array_free(struct store_array *a);

/**
 * Claim keys (already unique and sorted) in one statement. fresh[i] is set
 * to 1 for each key this transaction inserted, 0 for a conflict. Keys
 * expire keep_ms after now (0: never), responses response_ttl_ms after now
 * (0: with the key) — by the database's clock.
 */
enum store_rc store_claim(struct store *s, const char *ns, size_t n, const char *const *keys,
                          const char *const *topics, const int32_t *parts, const int64_t *offsets,
                          const char *const *fingerprints, int64_t keep_ms, int64_t response_ttl_ms,
                          int *fresh, char *err, size_t errsz);

/** Final status ("DONE"/"FAILED") and first response of fresh keys. */
enum store_rc store_record(struct store *s, const char *ns, size_t n, const char *const *keys,
                           const char *const *statuses, const char *const *responses, char *err,
                           size_t errsz);

/** Stored outcome of keys seen before: callback per found key. */
typedef void(store_outcome_cb)(void *opaque, const char *key, const char *status,
                               const char *response, const char *fingerprint_hex);
enum store_rc store_outcomes(struct store *s, const char *ns, size_t n, const char *const *keys,
                             store_outcome_cb *cb, void *opaque, char *err, size_t errsz);

/** One partition's progress in a batch. */
struct store_progress {
        const char *topic;
        int32_t partition;
        int64_t from_offset; /* first offset of the partition in the batch */
        int64_t next_offset;
        int64_t consumed, applied, rejected, duplicates, dead_lettered, mismatches;
};

/** Upsert next offsets (never backwards) and add the counters. */
enum store_rc store_progress(struct store *s, const char *ns, size_t n,
                             const struct store_progress *p, char *err, size_t errsz);

/** next_offset per partition of a topic: out[i] = -1 where no row exists. */
enum store_rc store_offsets_get(struct store *s, const char *ns, const char *topic, size_t n,
                                const int32_t *parts, int64_t *out, char *err, size_t errsz);

/*
 * Crash-loop ledger, written in autocommit before a batch's handlers run, so
 * the count survives the crash it counts. A batch row counts the starts of
 * the range [offset, until) of a partition; a single row counts the starts
 * of one message run alone, and `inherited` the crashes of the batches that
 * held it before it was isolated.
 */
/** The batch row whose range covers offset, if any (*found 0 or 1). */
enum store_rc store_attempt_covering(struct store *s, const char *ns, const char *topic, int32_t partition,
                                     int64_t offset, int *found, int *attempts, int64_t *until, char *err,
                                     size_t errsz) __attribute__((warn_unused_result));
/** Count a start of the batch [from, until); *attempts is the count after it. */
enum store_rc store_attempt_batch(struct store *s, const char *ns, const char *topic, int32_t partition,
                                  int64_t from, int64_t until, int *attempts, char *err, size_t errsz)
        __attribute__((warn_unused_result));
/** Count a start of the message at offset alone; a new row inherits
 *  `inherited` crashes. Returns the starts alone and the inherited count. */
enum store_rc store_attempt_single(struct store *s, const char *ns, const char *topic, int32_t partition,
                                   int64_t offset, int inherited, int *attempts, int *inherited_out,
                                   char *err, size_t errsz) __attribute__((warn_unused_result));
/** Take back a counted start that ended without a crash (a revocation, a clean stop). */
enum store_rc store_attempt_release(struct store *s, const char *ns, const char *topic, int32_t partition,
                                    int64_t offset, int single, char *err, size_t errsz);
/** Forget attempts whose range is fully committed (below next_offset). */
enum store_rc store_attempts_done(struct store *s, const char *ns, const char *topic,
                                  int32_t partition, int64_t next_offset, char *err, size_t errsz);

#endif
