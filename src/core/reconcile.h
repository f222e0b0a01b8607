/* reconcile: asking a handler's reconcile() whether an in-doubt key's effect happened, and recording its answer. */
#ifndef DEDUPD_CORE_RECONCILE_H
#define DEDUPD_CORE_RECONCILE_H

#include <stdint.h>

#include "base/config.h"
#include "core/loader.h"
#include "pg/store.h"

/** What became of one in-doubt (EXPIRED) key. */
enum reconcile_outcome {
        RECONCILE_DONE,      /* the effect happened: DONE */
        RECONCILE_FAILED,    /* it did not and must not: FAILED */
        RECONCILE_REEXECUTE, /* it did not: PENDING, its next message runs it */
        RECONCILE_UNKNOWN,   /* could not tell: still EXPIRED, asked again later */
        RECONCILE_MOVED,     /* someone else answered it meanwhile: left as they have it */
};

/** An EXPIRED key to ask about (pg/reconcile.h's row, as the handler sees it). */
struct reconcile_key {
        const char *idem_key;
        int32_t partition;
        int64_t offset;
        int attempts, reconciled;
};

/**
 * Ask h about one EXPIRED key of topic t and record the answer by
 * compare-and-set (pg/reconcile.h), on s in autocommit: counted in
 * dedupd_reconcile_total and logged. A transaction the handler left open
 * is rolled back and the answer taken as unknown. Returns STORE_OK with
 * *out, or the store's failure (the key is left EXPIRED).
 */
enum store_rc reconcile_key(struct handler *h, struct store *s, const char *ns, const struct topic_conf *t,
                            const struct reconcile_key *k, enum reconcile_outcome *out, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/**
 * The reaper's round for topic t (after it marked keys EXPIRED): at most
 * external.reconcile_budget keys asked fewer than external.reconcile_tries
 * times, the longest untouched first. Returns how many were asked.
 */
size_t reconcile_round(struct handler *h, struct store *s, const char *ns, const struct topic_conf *t);

#endif
