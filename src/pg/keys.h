/* keys: the statements of the transactional batch on dedupd.keys — claim, record outcomes, read first outcomes. */
#ifndef DEDUPD_PG_KEYS_H
#define DEDUPD_PG_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "pg/store.h"

/**
 * Claim keys (already unique and sorted) in one statement. fresh[i] is set
 * to 1 for each key this transaction inserted, 0 for a conflict. Keys
 * expire keep_ms after now (0: never), responses response_ttl_ms after now
 * (0: with the key) — by the database's clock.
 */
enum store_rc store_claim(struct store *s, const char *ns, size_t n, const char *const *keys,
                          const char *const *topics, const int32_t *parts, const int64_t *offsets,
                          const char *const *fingerprints, int64_t keep_ms, int64_t response_ttl_ms,
                          int *fresh, char *err, size_t errsz) __attribute__((warn_unused_result));

/** Final status ("DONE"/"FAILED") and first response of fresh keys. */
enum store_rc store_record(struct store *s, const char *ns, size_t n, const char *const *keys,
                           const char *const *statuses, const char *const *responses, char *err,
                           size_t errsz) __attribute__((warn_unused_result));

/** Stored outcome of keys seen before: callback per found key. */
typedef void(store_outcome_cb)(void *opaque, const char *key, const char *status,
                               const char *response, const char *fingerprint_hex);
enum store_rc store_outcomes(struct store *s, const char *ns, size_t n, const char *const *keys,
                             store_outcome_cb *cb, void *opaque, char *err, size_t errsz) __attribute__((warn_unused_result));

#endif
