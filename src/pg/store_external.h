/* store_external: the SQL of external-effect mode — claim with a lease, take over, finish fenced by owner, release, reap. */
#ifndef DEDUPD_STORE_EXTERNAL_H
#define DEDUPD_STORE_EXTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pg/key_status.h"
#include "pg/store.h"

/*
 * Every statement here runs in autocommit: a claim must be visible to other
 * instances before the effect starts, and a finish must not wait for
 * anything else. Times (leases, expiry) are the database's clock, never the
 * host's, so instances with skewed clocks agree on who owns a key.
 */

/** A key's row as a duplicate finds it. */
struct store_ext_row {
        enum key_status status;
        char owner[256];      /* "" when NULL */
        char lease_until[64]; /* "" when NULL; the database's text form */
        int live;             /* PENDING and lease_until > now() */
        int attempts;
        int reconciled;       /* reconcile() answers that could not tell */
        char response[256];   /* first response, cut to fit; "" when NULL */
        char fingerprint[65]; /* hex; "" when NULL */
};

/**
 * INSERT the key as PENDING owned by owner with lease_until = now() +
 * lease_ms, attempts 1, expiry like store_claim (keep_ms / response_ttl_ms,
 * 0: never). *claimed = 1 when this call inserted it, 0 on a conflict.
 */
enum store_rc store_ext_claim(struct store *s, const char *ns, const char *key, const char *key_text, const char *topic,
                              int32_t partition, int64_t offset, const char *fingerprint, const char *owner,
                              int64_t lease_ms, int64_t keep_ms, int64_t response_ttl_ms, int *claimed, char *err,
                              size_t errsz) __attribute__((warn_unused_result));

/** Read a key's row; *found = 0 when there is none. */
enum store_rc store_ext_read(struct store *s, const char *ns, const char *key, struct store_ext_row *row, int *found,
                             char *err, size_t errsz) __attribute__((warn_unused_result));

/**
 * Compare-and-set takeover. From PENDING: only when the lease ran out, or
 * the row is owner's own (an interrupted attempt of this process). From
 * EXPIRED (on_expired: reexecute): back to PENDING. Sets owner, a new lease
 * and attempts + 1. *attempts = the new count, or 0 when the row was not in
 * that state any more (someone else took it).
 */
enum store_rc store_ext_take_over(struct store *s, const char *ns, const char *key, const char *owner, int64_t lease_ms,
                                  int from_expired, int *attempts, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/**
 * Record the outcome (KEY_DONE or KEY_FAILED) and first response, fenced by
 * owner: *finished = 0 when the row is no longer PENDING under owner (the
 * lease was lost) — it is then left exactly as the new owner has it.
 */
enum store_rc store_ext_finish(struct store *s, const char *ns, const char *key, const char *owner,
                               enum key_status status, const char *response, int *finished, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** Give the lease up now (handler RETRY): the next attempt may take over at once. */
enum store_rc store_ext_release(struct store *s, const char *ns, const char *key, const char *owner, char *err,
                                size_t errsz) __attribute__((warn_unused_result));

/**
 * Mark at most `limit` PENDING keys of topic whose lease ran out more than
 * expire_after_ms ago as EXPIRED (owner cleared, row kept). *reaped = how
 * many; the first of their keys are appended to sample (comma-separated,
 * cut to fit).
 */
enum store_rc store_ext_reap(struct store *s, const char *ns, const char *topic, int64_t expire_after_ms, int limit,
                             size_t *reaped, char *sample, size_t samplesz, char *err, size_t errsz)
        __attribute__((warn_unused_result));

#endif
