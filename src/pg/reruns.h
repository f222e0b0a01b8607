/* reruns: the SQL behind dedupctl rerun — an operator's audited re-run of one key, and its history. */
#ifndef DEDUPD_PG_RERUNS_H
#define DEDUPD_PG_RERUNS_H

#include <stddef.h>
#include <stdint.h>

#include "pg/store.h"

/** What a re-run does. */
enum rerun_mode {
        RERUN_REEXECUTE, /* the key goes: its next delivery (or a replay) runs the handler once more */
        RERUN_EMIT_ONLY, /* its outbox rows go out again, with the identity they went out with */
};

/** What a re-run found and did. */
enum rerun_result {
        RERUN_OK,
        RERUN_NOT_FOUND, /* no such key (a re-run already awaits its next delivery, or it was purged) */
        RERUN_IN_FLIGHT, /* PENDING: an owner runs it now, or it is in doubt (reconcile, or wait for the reaper) */
        RERUN_NO_OUTBOX, /* --emit-only and the key has no outbox row (none emitted, or purged after outbox.keep) */
};

/** The key's record as the re-run found it (what the audit row keeps). */
struct rerun_info {
        int generation; /* this re-run's number for the key: 1 for the first */
        char status[16];
        char topic[256];
        int32_t partition;
        int64_t offset;  /* -1 when unknown */
        int outbox_rows; /* --emit-only: rows put back to be published */
};

/**
 * In one transaction: lock the key's row, refuse a PENDING one, write the
 * audit row (by, reason, the previous status, response, attempts and
 * origin; the database role it ran as), then delete the key's row
 * (RERUN_REEXECUTE) or put its outbox rows back to unsent
 * (RERUN_EMIT_ONLY). Nothing is changed unless *result is RERUN_OK.
 */
enum store_rc store_rerun(struct store *s, const char *ns, const char *key, enum rerun_mode mode, const char *by,
                          const char *reason, enum rerun_result *result, struct rerun_info *info, char *err,
                          size_t errsz) __attribute__((warn_unused_result));

/**
 * on_failed: retry, inside a batch's transaction before its claim: of the
 * batch's keys, those FAILED more than after_ms ago are deleted (the claim
 * then finds them fresh and the handler runs on them) and each gets an
 * audit row (mode on-failed, by dedupd, with reason). *n = how many.
 */
enum store_rc store_retry_failed(struct store *s, const char *ns, const char *const *keys, size_t nkeys,
                                 int64_t after_ms, const char *reason, size_t *n, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** A key's re-runs, oldest first: generation, mode, requested_at, by, db_user, reason, previous status and response. */
enum store_rc store_rerun_history(struct store *s, const char *ns, const char *key, PGresult **out, char *err,
                                  size_t errsz) __attribute__((warn_unused_result));

/** The namespace's re-runs by mode: mode, count. */
enum store_rc store_rerun_counts(struct store *s, const char *ns, PGresult **out, char *err, size_t errsz)
        __attribute__((warn_unused_result));

#endif
