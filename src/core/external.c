/* external: external-effect mode (docs/design.md §6) — claim PENDING with a lease, run the effect, finish fenced by owner; the reaper. */
#include "core/external.h"

#include "base/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fault.h"
#include "core/host.h"
#include "base/log.h"
#include "core/batch.h"
#include "core/steps.h"
#include "pg/store_external.h"
#include "core/instance.h"
#include "core/watchdog.h"
#include "ops/metrics.h"
#include "pg/offsets.h"
#include "core/pipeline.h"
#include "core/reconcile.h"

#define REAP_INTERVAL_MS 5000
#define REAP_BATCH 500
#define REAP_MAX_ROUNDS 20 /* per topic and tick: a backlog is worked off over several ticks */

#define IN_DOUBT_REASON "in doubt: EXPIRED key, effect may or may not have happened; reconcile"

/* One daemon, one consumer loop: process-wide state is enough. */
static struct {
        int reaped_once;
        int64_t last_reap_ms;
        struct log_ratelimit rl_reap;
        struct external_stats stats;
} ext;

const char *external_owner(void) { return instance_owner(); }

const struct external_stats *external_stats(void) { return &ext.stats; }

static enum pl_rc db_fail(enum store_rc rc) { return rc == STORE_CONN ? PL_DB_DOWN : PL_RETRY; }

/* A statement on m's key failed: a value of m it refused (STORE_DATA) is
 * m's failed attempt, so it is dead-lettered in time instead of retried
 * for ever. */
static enum pl_rc key_fail(const struct pl_topic *pt, struct pl_entry *e, enum store_rc rc)
{
        if (rc == STORE_DATA)
                step_attempt(&e->st, "a statement of dedupd refused a value of it (%s)", store_last_failure(pt->store));
        return db_fail(rc);
}

/* Run the handler on a key this process owns, then finish it. */
/* The handler, on dedupd's connection in autocommit: for reads and its own
 * bookkeeping, committed statement by statement. */
static dedupd_result_t ext_call(struct pl_topic *pt, struct pl_entry *e, struct dedupd_ctx *ctx)
{
        struct handler *h = pt->handler;
        const struct dedupd_handler *d = h->desc;
        const struct pl_msg *m = e->msg;
        struct dedupd_msg dm = {m->topic, m->partition, m->offset,  m->timestamp_ms, m->key,        m->key_len,
                                m->value, m->value_len, m->headers, m->header_cnt,   e->st.idem_key};
        const struct dedupd_msg *mp = &dm;
        dedupd_result_t one = DEDUPD_RETRY, r;
        if (d->handle)
                return d->handle(h->state, ctx, &dm);
        r = d->handle_batch(h->state, &ctx, &mp, 1, &one);
        return r == DEDUPD_OK ? one : r;
}

/* Fenced: someone took the key while the effect ran here. */
static void ext_lost(struct pl_topic *pt, const struct pl_entry *e, const char *mctx, enum key_status status)
{
        struct store_ext_row row;
        int found = 0;
        char rerr[256];
        if (store_ext_read(pt->store, pt->cfg->namespace, e->st.idem_key, &row, &found, rerr, sizeof(rerr)))
                found = 0;
        ext.stats.lost_leases++;
        log_error(mctx,
                  "offset %lld: key %s: lost lease — another owner took the key while the effect ran here (now %s, "
                  "owner %s, attempt %d); this attempt's outcome (%s) is not recorded and the row is left as it is; "
                  "the effect may have happened twice unless the downstream dedups by the key (%" PRIu64
                  " lost since start)",
                  (long long)e->msg->offset, e->st.idem_key, found ? key_status_name(row.status) : "gone",
                  found && row.owner[0] ? row.owner : "none", found ? row.attempts : 0, key_status_name(status),
                  ext.stats.lost_leases);
}

/* Record the outcome, fenced by owner: finished, or lost to another owner. */
static enum pl_rc ext_finish(struct pl_topic *pt, struct pl_entry *e, const char *mctx, int attempt, dedupd_result_t r,
                             const struct dedupd_ctx *ctx, enum item_state *out, char *err, size_t errsz)
{
        enum key_status status = r == DEDUPD_OK ? KEY_DONE : KEY_FAILED;
        const char *resp = ctx->response ? ctx->response : r == DEDUPD_REJECT ? "rejected" : NULL;
        int finished;
        enum store_rc rc;
        if ((rc = store_ext_finish(pt->store, pt->cfg->namespace, e->st.idem_key, external_owner(), status, resp,
                                   &finished, err, errsz)))
                return key_fail(pt, e, rc);
        if (!finished) {
                ext_lost(pt, e, mctx, status);
                *out = ITEM_LOST;
                return PL_OK;
        }
        *out = r == DEDUPD_OK ? ITEM_APPLIED : ITEM_REJECTED;
        host_count_refusals(ctx); /* the outcome is recorded: its refused calls count, a retried attempt's did not */
        if (r == DEDUPD_REJECT)
                log_info(mctx, "key %s rejected: %s", e->st.idem_key, resp);
        else if (attempt > 1)
                log_info(mctx, "offset %lld: key %s finished %s on attempt %d: %s", (long long)e->msg->offset,
                         e->st.idem_key, key_status_name(status), attempt, resp ? resp : "(no response)");
        return PL_OK;
}

/* RETRY (or an unknown result, or a transaction left open): the lease is
 * given up so the retry, here or anywhere, may take over at once. */
static enum pl_rc ext_retry(struct pl_topic *pt, struct pl_entry *e, const char *mctx, dedupd_result_t r, int in_txn,
                            char *err, size_t errsz)
{
        char rerr[256];
        enum store_rc rc;
        step_attempt(&e->st, "%s",
                     in_txn              ? "handler left a transaction open"
                     : r != DEDUPD_RETRY ? "handler returned an unknown result"
                                         : "handler returned RETRY");
        if (in_txn)
                snprintf(err, errsz,
                         "handler left a transaction open on the autocommit connection for key %s; rolled back, "
                         "treated as RETRY",
                         e->st.idem_key);
        else if (r != DEDUPD_RETRY)
                snprintf(err, errsz, "handler returned unknown result %d for key %s", (int)r, e->st.idem_key);
        else
                snprintf(err, errsz, "handler asked to retry key %s", e->st.idem_key);
        log_warn(mctx, "offset %lld: %s (attempt %d of %d)", (long long)e->msg->offset, err, e->st.attempts,
                 pt->t->retry_max_attempts);
        rc = store_ext_release(pt->store, pt->cfg->namespace, e->st.idem_key, external_owner(), rerr, sizeof(rerr));
        if (rc == STORE_CONN)
                return PL_DB_DOWN;
        if (rc)
                log_warn(mctx, "key %s: the lease could not be given up (%s); it runs out by itself", e->st.idem_key,
                         rerr);
        return PL_RETRY;
}

/* What the handler set on the session does not reach dedupd's statements. */
static void reset_session(struct pl_topic *pt, const struct pl_entry *e)
{
        char rerr[256];
        int held;
        if (store_session_reset(pt->store, 0, &held, rerr, sizeof(rerr)))
                log_warn(pt->ctx, "key %s: resetting the session after the handler: %s", e->st.idem_key, rerr);
}

/* Run the handler on a key this process owns, then finish it. */
static enum pl_rc ext_run(struct pl_topic *pt, struct pl_entry *e, const char *mctx, int attempt, enum item_state *out,
                          char *err, size_t errsz)
{
        struct store *s = pt->store;
        struct dedupd_ctx ctx = {
                .head = {&host_api, s, NULL}, .idem_key = e->st.idem_key, .log_prefix = pt->handler->log_prefix};
        enum pl_rc ret;

        fault_point("after_claim");
        dedupd_result_t r = ext_call(pt, e, &ctx);
        host_ctx_release(&ctx.head);
        fault_point("in_handler");
        if (!store_ok(s)) {
                /* The lease stays; after reconnecting this process finds its
                 * own row and resumes it (the handler runs again, with the key). */
                snprintf(err, errsz, "database connection lost in the handler of key %s", e->st.idem_key);
                ret = PL_DB_DOWN;
        } else {
                int in_txn = !store_idle(s);
                if (in_txn)
                        store_rollback(s);
                reset_session(pt, e);
                if ((r == DEDUPD_OK || r == DEDUPD_REJECT) && !in_txn)
                        ret = ext_finish(pt, e, mctx, attempt, r, &ctx, out, err, errsz);
                else
                        ret = ext_retry(pt, e, mctx, r, in_txn, err, errsz);
        }
        host_ctx_reset(&ctx);
        return ret;
}

/* An EXPIRED key met with on_expired: dead-letter. */
static enum pl_rc ext_dead_letter_expired(struct pl_topic *pt, struct pl_entry *e, const char *mctx,
                                          enum item_state *out, char *err, size_t errsz)
{
        struct pl_entry *one[1] = {e};
        free(e->st.dlq_reason);
        e->st.dlq_reason = xstrdup(IN_DOUBT_REASON);
        if (step_dead_letter(pt, one, 1, err, errsz))
                return PL_DLQ_FAILED; /* dlq_reason stays: the retry dead-letters it first */
        ext.stats.expired_dead_lettered++;
        log_warn(mctx,
                 "offset %lld: key %s is EXPIRED (in doubt): dead-lettered to %s for "
                 "reconciliation (on_expired: dead-letter)",
                 (long long)e->msg->offset, e->st.idem_key, pt->t->dlq_topic);
        *out = ITEM_DEAD_LETTER;
        return PL_OK;
}

/* A duplicate whose payload differs from the first one's: a key-design or
 * client bug, handled by fingerprint.on_mismatch as in transactional mode. */
static enum pl_rc ext_mismatch(struct pl_topic *pt, struct pl_entry *e, const struct store_ext_row *row,
                               enum item_state *out, int *mismatch, char *err, size_t errsz)
{
        struct pl_entry *one[1] = {e};
        enum mismatch_verdict v = step_mismatch(pt, e, row->fingerprint);
        enum store_rc rc;
        *mismatch = v != MISMATCH_NONE;
        *out = ITEM_KNOWN;
        if (*mismatch && (rc = step_note_mismatch(pt, e, row->fingerprint, v, err, errsz)))
                return db_fail(rc);
        if (v != MISMATCH_LETTER)
                return PL_OK;
        if (step_dead_letter(pt, one, 1, err, errsz))
                return PL_DLQ_FAILED; /* dlq_reason stays: the retry dead-letters it first */
        *out = ITEM_DEAD_LETTER;
        return PL_OK;
}

static enum pl_rc ext_pending(struct pl_topic *pt, struct pl_entry *e, const struct store_ext_row *row,
                              const char *mctx, enum item_state *out, char *err, size_t errsz);

/* An EXPIRED key and a handler with reconcile(): asked first. *handled = 0:
 * it could not tell (or was asked enough), on_expired decides. */
static enum pl_rc ext_reconcile(struct pl_topic *pt, struct pl_entry *e, const struct store_ext_row *row,
                                const char *mctx, enum item_state *out, int *handled, char *err, size_t errsz)
{
        struct reconcile_key k = {e->st.idem_key, e->msg->partition, e->msg->offset, row->attempts, row->reconciled};
        struct store_ext_row now;
        enum reconcile_outcome o;
        enum store_rc rc;
        int found = 0;
        *handled = 0;
        if (row->reconciled >= pt->t->reconcile_tries)
                return PL_OK;
        if ((rc = reconcile_key(pt->handler, pt->store, pt->cfg->namespace, pt->t, &k, &o, err, errsz)))
                return key_fail(pt, e, rc);
        *handled = o != RECONCILE_UNKNOWN;
        switch (o) {
        case RECONCILE_DONE:
        case RECONCILE_FAILED: *out = ITEM_KNOWN; return PL_OK; /* absorbed: the effect's outcome is known now */
        case RECONCILE_UNKNOWN: return PL_OK;
        case RECONCILE_REEXECUTE: break;
        case RECONCILE_MOVED:
                snprintf(err, errsz, "offset %lld: key %s was answered elsewhere meanwhile: backing off",
                         (long long)e->msg->offset, e->st.idem_key);
                return PL_RETRY;
        }
        /* PENDING with its lease run out: taken over and run here, once. */
        if ((rc = store_ext_read(pt->store, pt->cfg->namespace, e->st.idem_key, &now, &found, err, errsz)))
                return key_fail(pt, e, rc);
        if (!found || now.status != KEY_PENDING) {
                snprintf(err, errsz, "offset %lld: key %s changed after reconcile(): backing off",
                         (long long)e->msg->offset, e->st.idem_key);
                return PL_RETRY;
        }
        return ext_pending(pt, e, &now, mctx, out, err, errsz);
}

/* A key that is EXPIRED (in doubt): reconcile() when the handler has one,
 * then on_expired decides. */
static enum pl_rc ext_expired(struct pl_topic *pt, struct pl_entry *e, const struct store_ext_row *row,
                              const char *mctx, enum item_state *out, char *err, size_t errsz)
{
        int attempts, handled = 0;
        enum store_rc rc;
        enum pl_rc ret;
        if (pt->t->reconcile && loader_has_reconcile(pt->handler) &&
            ((ret = ext_reconcile(pt, e, row, mctx, out, &handled, err, errsz)) != PL_OK || handled))
                return ret;
        switch (pt->t->on_expired) {
        case EXPIRED_DEAD_LETTER: return ext_dead_letter_expired(pt, e, mctx, out, err, errsz);
        case EXPIRED_SKIP:
                ext.stats.expired_skipped++;
                log_warn(mctx,
                         "offset %lld: key %s is EXPIRED (in doubt): acknowledged without running the "
                         "handler (on_expired: skip)",
                         (long long)e->msg->offset, e->st.idem_key);
                *out = ITEM_SKIPPED;
                return PL_OK;
        case EXPIRED_REEXECUTE: break;
        }
        if ((rc = store_ext_take_over(pt->store, pt->cfg->namespace, e->st.idem_key, external_owner(), pt->t->lease_ms,
                                      1, &attempts, err, errsz)))
                return key_fail(pt, e, rc);
        if (!attempts) {
                snprintf(err, errsz, "offset %lld: key %s was EXPIRED and another instance re-executes it: backing off",
                         (long long)e->msg->offset, e->st.idem_key);
                return PL_RETRY;
        }
        ext.stats.expired_reexecuted++;
        log_warn(mctx, "offset %lld: key %s was EXPIRED (in doubt): re-executing (on_expired: reexecute), attempt %d",
                 (long long)e->msg->offset, e->st.idem_key, attempts);
        return ext_run(pt, e, mctx, attempts, out, err, errsz);
}

/* A key that is PENDING: wait for a live lease, take over one that ran out. */
static enum pl_rc ext_pending(struct pl_topic *pt, struct pl_entry *e, const struct store_ext_row *row,
                              const char *mctx, enum item_state *out, char *err, size_t errsz)
{
        const char *me = external_owner();
        int attempts;
        enum store_rc rc;
        if (row->live && strcmp(row->owner, me)) {
                ext.stats.lease_waits++;
                snprintf(err, errsz,
                         "offset %lld: key %s is PENDING under a live lease (owner %s, until %s, attempt %d): not "
                         "acknowledged, backing off",
                         (long long)e->msg->offset, e->st.idem_key, row->owner, row->lease_until, row->attempts);
                return PL_RETRY;
        }
        if ((rc = store_ext_take_over(pt->store, pt->cfg->namespace, e->st.idem_key, me, pt->t->lease_ms, 0, &attempts,
                                      err, errsz)))
                return key_fail(pt, e, rc);
        if (!attempts) {
                snprintf(err, errsz, "offset %lld: key %s: another instance took the expired lease first: backing off",
                         (long long)e->msg->offset, e->st.idem_key);
                return PL_RETRY;
        }
        ext.stats.taken_over++;
        metrics_takeover(pt->t->name);
        if (strcmp(row->owner, me))
                log_warn(mctx,
                         "offset %lld: key %s: the lease of %s ran out at %s; taken over by compare-and-set "
                         "(attempt %d)",
                         (long long)e->msg->offset, e->st.idem_key, row->owner[0] ? row->owner : "(none)",
                         row->lease_until, attempts);
        else
                log_info(mctx,
                         "offset %lld: key %s: this process takes its own released or interrupted lease back "
                         "(attempt %d)",
                         (long long)e->msg->offset, e->st.idem_key, attempts);
        return ext_run(pt, e, mctx, attempts, out, err, errsz);
}

/* Claim the key; *claimed 1: it is ours now; else *row is what holds it. */
static enum pl_rc ext_claim(struct pl_topic *pt, struct pl_entry *e, int *claimed, struct store_ext_row *row, char *err,
                            size_t errsz)
{
        const struct topic_conf *t = pt->t;
        const char *ns = pt->cfg->namespace;
        int64_t keep = t->retention ? t->retention->keep_ms : 0;
        int64_t ttl = t->retention ? t->retention->response_ttl_ms : 0;
        enum store_rc rc;
        int found = 0;

        /* Twice at most: a row purged between the claim and the read is claimed again. */
        for (int tries = 0; tries < 2 && !found; tries++) {
                if ((rc = store_ext_claim(pt->store, ns, e->st.idem_key, e->st.key_text, e->msg->topic,
                                          e->msg->partition, e->msg->offset, e->st.fingerprint, external_owner(),
                                          t->lease_ms, keep, ttl, claimed, err, errsz)))
                        return key_fail(pt, e, rc);
                if (*claimed)
                        return PL_OK;
                if ((rc = store_ext_read(pt->store, ns, e->st.idem_key, row, &found, err, errsz)))
                        return key_fail(pt, e, rc);
        }
        if (!found) {
                snprintf(err, errsz, "key %s could be neither claimed nor read", e->st.idem_key);
                return PL_RETRY;
        }
        return PL_OK;
}

/* A key finished before: a duplicate, served its first outcome (or a mismatch). */
static enum pl_rc ext_known(struct pl_topic *pt, struct pl_entry *e, const struct store_ext_row *row, const char *mctx,
                            enum item_state *out, int *mismatch, char *err, size_t errsz)
{
        if (row->fingerprint[0] && strcmp(row->fingerprint, e->st.fingerprint))
                return ext_mismatch(pt, e, row, out, mismatch, err, errsz);
        log_debug(mctx, "duplicate %s absorbed; first outcome %s: %s", e->st.idem_key, key_status_name(row->status),
                  row->response[0] ? row->response : "(no response)");
        *out = ITEM_KNOWN;
        return PL_OK;
}

/* Claim one message's key (or learn why not), run it, finish it. */
static enum pl_rc ext_one(struct pl_topic *pt, struct pl_entry *e, enum item_state *out, int *mismatch, char *err,
                          size_t errsz)
{
        struct store_ext_row row;
        int claimed = 0;
        char mctx[200];
        enum pl_rc rc;

        snprintf(mctx, sizeof(mctx), "topic:%s/%d", pt->t->name, (int)e->msg->partition);
        if ((rc = ext_claim(pt, e, &claimed, &row, err, errsz)))
                return rc;
        if (claimed) {
                ext.stats.claimed++;
                return ext_run(pt, e, mctx, 1, out, err, errsz);
        }
        switch (row.status) {
        case KEY_DONE:
        case KEY_FAILED: return ext_known(pt, e, &row, mctx, out, mismatch, err, errsz);
        case KEY_EXPIRED: return ext_expired(pt, e, &row, mctx, out, err, errsz);
        case KEY_PENDING: break;
        }
        return ext_pending(pt, e, &row, mctx, out, err, errsz);
}

/* A partial batch comes back: what this process committed of it is done. */
static int ext_done_before(struct pl_topic *pt, const struct pl_entry *e)
{
        return part_state(pt->parts, pt->topic_idx, e->msg->partition)->verified_next > e->msg->offset;
}

/* Keys; what cannot be processed is dead-lettered first (acknowledged by
 * the broker before its offset can be committed). */
static enum pl_rc ext_dead_letter_unkeyable(struct pl_topic *pt, struct pl_entry *const *ents, size_t n, char *err,
                                            size_t errsz)
{
        struct pl_entry **todo = xcalloc(n ? n : 1, sizeof(*todo)); /* n: up to 100,000 */
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                if (ext_done_before(pt, ents[i]))
                        continue;
                step_prepare(pt, ents[i]);
                if (ents[i]->st.dlq_reason && !ents[i]->st.dead_lettered)
                        todo[k++] = ents[i];
        }
        enum pl_rc rc = step_dead_letter(pt, todo, k, err, errsz) ? PL_DLQ_FAILED : PL_OK;
        free(todo);
        return rc;
}

/* One message at a time, in partition-offset order; a message that cannot
 * be finished now stops its partition, not the others. What was finished is
 * counted into prog. */
static enum pl_rc ext_each(struct pl_topic *pt, struct pl_entry *const *ents, size_t n, struct store_progress *prog,
                           size_t *nprog, size_t *processed, size_t *nstopped, char *err, size_t errsz)
{
        int32_t *stopped = xcalloc(n ? n : 1, sizeof(*stopped)); /* the partitions stopped early */
        enum pl_rc ret = PL_OK;
        char merr[1024];

        for (size_t i = 0; i < n; i++) {
                struct pl_entry *e = ents[i];
                enum item_state o = ITEM_DEAD_LETTER;
                int mismatch = 0, blocked = 0;
                if (ext_done_before(pt, e))
                        continue;
                for (size_t b = 0; b < *nstopped && !blocked; b++)
                        blocked = stopped[b] == e->msg->partition;
                if (blocked)
                        continue;
                if (!e->st.dlq_reason) {
                        char what[200];
                        snprintf(what, sizeof(what), "key %s of %s", e->st.idem_key, pt->t->name);
                        watchdog_arm(pt->watchdog, pt->store, pt->t->batch_timeout_ms, what);
                        merr[0] = '\0';
                        enum pl_rc r = ext_one(pt, e, &o, &mismatch, merr, sizeof(merr));
                        watchdog_disarm(pt->watchdog);
                        if (r != PL_OK) {
                                stopped[(*nstopped)++] = e->msg->partition;
                                /* The first reason is reported; losing the database outranks it. */
                                if (ret == PL_OK || r == PL_DB_DOWN) {
                                        snprintf(err, errsz, "%s", merr);
                                        ret = r;
                                }
                                if (r == PL_DB_DOWN)
                                        break;
                                continue;
                        }
                }
                progress_count(prog, nprog, e->msg, o, mismatch);
                (*processed)++;
        }
        free(stopped);
        return ret;
}

static enum pl_rc external_process(struct pl_topic *pt, struct pl_entry *const *ents, size_t n,
                                   struct pl_commit *commits, size_t *ncommits, char *err, size_t errsz)
{
        struct store_progress *prog = xcalloc(n ? n : 1, sizeof(*prog));
        size_t nprog = 0, nstopped = 0, processed = 0;
        enum pl_rc ret;
        enum store_rc rc;
        char merr[1024];

        *ncommits = 0;
        if ((ret = ext_dead_letter_unkeyable(pt, ents, n, err, errsz)))
                goto out;
        ret = ext_each(pt, ents, n, prog, &nprog, &processed, &nstopped, err, errsz);
        /* Progress of what was finished: one statement, its own transaction. */
        if (!nprog || !store_ok(pt->store))
                goto out;
        fault_point("before_commit");
        rc = STORE_OK;
        if (step_progress(pt, prog, nprog, &rc, merr, sizeof(merr)) != PL_OK) {
                /* Finished keys are in the table: their redelivery is absorbed. */
                if (ret == PL_OK || rc == STORE_CONN || !rc) {
                        snprintf(err, errsz, "%s", merr);
                        ret = rc ? db_fail(rc) : PL_REPOSITION;
                }
                goto out;
        }
        fault_point("after_commit");
        /* Committed: where each partition may be acknowledged, even when another
         * of the batch's messages stopped its partition. */
        *ncommits = step_committed(pt, prog, nprog, commits);
        pt->stats->batches++;
        pt->stats->consumed += processed;
        log_debug(pt->ctx, "external batch of %zu: %zu finished, %zu partition(s) stopped early", n, processed,
                  nstopped);
out:
        if (ret != PL_OK)
                pt->stats->retries++;
        free(prog);
        return ret;
}

const struct mode mode_external = {"external", external_process};

/* What a reaper round marked EXPIRED: counted and logged. */
static void report_reaped(const struct topic_conf *t, size_t total, const char *sample)
{
        char ctx[200], d[64];
        if (!total)
                return;
        ext.stats.expired_reaped += total;
        metrics_expired(t->name, total);
        snprintf(ctx, sizeof(ctx), "topic:%s", t->name);
        log_warn(ctx,
                 "reaper: %zu PENDING key%s whose lease ran out more than %s ago marked EXPIRED "
                 "(in doubt: the effect may or may not have happened; reconcile): %s; "
                 "%" PRIu64 " since start",
                 total, total == 1 ? "" : "s", config_format_duration(t->expire_grace_ms, d, sizeof(d)), sample,
                 ext.stats.expired_reaped);
}

void external_reap_tick(const struct config *cfg, struct store *s, struct pipeline *pl, int64_t now_ms)
{
        char err[512], sample[400];

        if (ext.reaped_once && now_ms - ext.last_reap_ms < REAP_INTERVAL_MS)
                return;
        ext.reaped_once = 1;
        ext.last_reap_ms = now_ms;
        /* Between batches only, on an idle connection; a database that is down
         * is the consumer's business. */
        if (!store_idle(s))
                return;
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                const struct topic_conf *t = &cfg->topics[i];
                size_t total = 0, got = 0;
                if (t->mode != MODE_EXTERNAL)
                        continue;
                sample[0] = '\0';
                for (int round = 0; round < REAP_MAX_ROUNDS; round++) {
                        if (store_ext_reap(s, cfg->namespace, t->name, t->expire_grace_ms, REAP_BATCH, &got, sample,
                                           sizeof(sample), err, sizeof(err))) {
                                log_limited(&ext.rl_reap, 1, 60000, LOG_WARN, "reaper", "topic %s: %s", t->name, err);
                                break;
                        }
                        total += got;
                        if (got < REAP_BATCH)
                                break;
                }
                report_reaped(t, total, sample);
                if (pl && t->reconcile && loader_has_reconcile(pipeline_handler(pl, i)))
                        reconcile_round(pipeline_handler(pl, i), s, cfg->namespace, t);
        }
}
