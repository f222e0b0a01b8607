/* keys: the statements of the transactional batch on dedupd.keys — probe and insert (the optimistic claim), or claim and record outcomes (the pessimistic one), read first outcomes. */
#ifndef DEDUPD_PG_KEYS_H
#define DEDUPD_PG_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "pg/key_status.h"
#include "pg/store.h"

/** Where a claimed key's row is, for the rest of its transaction: "(block,item)". */
#define STORE_ROW_LEN 24

/** Stored outcome of a key seen before, as read. */
typedef void(store_outcome_cb)(void *opaque, const char *key, enum key_status status, const char *response,
                               const char *fingerprint_hex);

/*
 * Two ways to claim a batch's keys, both in key order (the order claimers
 * lock in):
 *
 * - optimistic (store_probe_keys, then store_insert_keys): look, run the handler
 *   on the keys found absent, then insert each of them once, with its final
 *   outcome. The primary key is the judge: a key another transaction
 *   committed in between makes the INSERT fail (STORE_CONFLICT).
 * - pessimistic (store_claim, then store_record): insert first, ON CONFLICT
 *   DO NOTHING, and update the outcome by row after the handler. It cannot
 *   conflict: a concurrent claimer of a key waits for this transaction.
 */

/** One key to claim, and (out) what the claim found. */
struct store_claim_row {
        const char *key, *topic, *fingerprint;
        const char *key_text; /* the text of a hashed key, or NULL */
        int32_t partition;
        int64_t offset;
        int64_t keep_ms, response_ttl_ms; /* in: its own retention (a tenant's class); keep 0: the batch's */
        int want_outcome;                 /* in: read its first outcome when seen before (a reply needs it) */
        int fresh;               /* out: 1 when inserted by this transaction (store_probe_keys: found absent) */
        int matched;             /* out: seen before with this very fingerprint; its outcome was not read */
        char row[STORE_ROW_LEN]; /* out, when fresh (store_claim only): its row, for store_record */
};

/** Where the outcomes of keys seen before go. */
struct store_claim_outcomes {
        store_outcome_cb *cb; /* per known key whose outcome was read */
        void *opaque;
};

/**
 * Claim keys (already unique and sorted) and read what the batch needs of
 * the keys seen before, in one statement: the outcome of each known key
 * that wants it or whose stored fingerprint differs from (or is not) this
 * one; the others are `matched`. A key another
 * transaction committed while this one waited for it is read in a second
 * statement. Keys expire keep_ms after now (0: never), responses
 * response_ttl_ms after now (0: with the key) — by the database's clock.
 */
enum store_rc store_claim(struct store *s, const char *ns, struct store_claim_row *rows, size_t n, int64_t keep_ms,
                          int64_t response_ttl_ms, const struct store_claim_outcomes *out, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/**
 * The optimistic claim's look: which keys (already unique and sorted) are
 * stored, and what the batch needs of those that are, as store_claim reads
 * it, in one read-only statement (a LATERAL ... LIMIT 1 index probe per key).
 * The others are `fresh`: nobody's yet, and not inserted. When one is, the
 * statement also puts the batch's commit guard in place (pg/session.h), as
 * store_claim does when it inserts one.
 */
enum store_rc store_probe_keys(struct store *s, const char *ns, struct store_claim_row *rows, size_t n,
                               const struct store_claim_outcomes *out, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** A key store_probe_keys found absent, as it is written once: with its outcome. */
struct store_key_row {
        const char *key, *topic, *fingerprint;
        const char *key_text; /* the text of a hashed key, or NULL */
        int32_t partition;
        int64_t offset;
        int64_t keep_ms, response_ttl_ms; /* its own retention (a tenant's class); keep 0: the batch's */
        enum key_status status;           /* KEY_DONE or KEY_FAILED */
        const char *response;             /* or NULL */
};

/**
 * Insert the keys store_probe_keys found absent (sorted), each with its final
 * status and response, fingerprint, first topic/partition/offset and expiry
 * (as store_claim), in key order, in one plain INSERT (no ON CONFLICT).
 * STORE_CONFLICT: another transaction committed one of them since the probe
 * (the primary key refused it; this transaction is aborted). On STORE_DATA,
 * err is the failure without its DETAIL (as store_last_failure).
 */
enum store_rc store_insert_keys(struct store *s, const char *ns, const struct store_key_row *rows, size_t n,
                                int64_t keep_ms, int64_t response_ttl_ms, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** A key store_claim inserted, and the outcome to record on it. */
struct store_outcome_row {
        const char *key;        /* store_claim_row.key */
        const char *row;        /* store_claim_row.row */
        enum key_status status; /* KEY_DONE or KEY_FAILED */
        const char *response;   /* or NULL */
};

/**
 * Final status and first response of keys this transaction claimed, by
 * their rows: a TID scan per row, whatever the planner knows of the table's
 * size; in the key's own partition (a row's place names a row in each
 * partition of dedupd.keys_p).
 */
enum store_rc store_record(struct store *s, const char *ns, const struct store_outcome_row *rows, size_t n, char *err,
                           size_t errsz) __attribute__((warn_unused_result));

/** Stored outcome of keys seen before: callback per found key. */
enum store_rc store_outcomes(struct store *s, const char *ns, size_t n, const char *const *keys, store_outcome_cb *cb,
                             void *opaque, char *err, size_t errsz) __attribute__((warn_unused_result));

#endif
