/* external: external-effect mode (design §6) — claim PENDING with a lease, run the effect, finish fenced by owner; the reaper. */
#include "external.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"
#include "host.h"
#include "log.h"
#include "pipeline_impl.h"
#include "store_external.h"
#include "watchdog.h"

#define REAP_INTERVAL_MS 5000
#define REAP_BATCH 500
#define REAP_MAX_ROUNDS 20 /* per topic and tick: a backlog is worked off over several ticks */

#define IN_DOUBT_REASON "in doubt: EXPIRED key, effect may or may not have happened; reconcile"

/* What became of one message. */
enum outcome {
        O_APPLIED = 1,
        O_REJECTED,
        O_DUPLICATE,
        O_DEAD_LETTERED,
        O_SKIPPED, /* EXPIRED with on_expired: skip — counted as a duplicate */
        O_LOST,    /* ran, but another owner had taken the key: counted as consumed only */
        O_MISMATCH,               /* a duplicate with another payload, absorbed */
        O_MISMATCH_DEAD_LETTERED, /* the same, dead-lettered (fingerprint.on_mismatch) */
};

/* One daemon, one consumer loop: process-wide state is enough. */
static struct {
        char owner[320];
        int reaped_once;
        int64_t last_reap_ms;
        struct log_ratelimit rl_reap;
        struct external_stats stats;
} ext;

const char *external_owner(void)
{
        if (!ext.owner[0]) {
                char host[256];
                unsigned char rnd[4];
                if (gethostname(host, sizeof(host)) != 0)
                        snprintf(host, sizeof(host), "unknown");
                host[sizeof(host) - 1] = '\0';
                if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                        /* Only the pid is then left to tell restarts apart; add the time. */
                        uint32_t x = (uint32_t)time(NULL) ^ (uint32_t)log_now_ms();
                        memcpy(rnd, &x, sizeof(rnd));
                }
                snprintf(ext.owner, sizeof(ext.owner), "%s:%ld:%02x%02x%02x%02x", host, (long)getpid(),
                         rnd[0], rnd[1], rnd[2], rnd[3]);
        }
        return ext.owner;
}

const struct external_stats *external_stats(void) { return &ext.stats; }

static enum pl_rc db_fail(enum store_rc rc) { return rc == STORE_CONN ? PL_DB_DOWN : PL_RETRY; }

/* The crash-loop guard's record of a partition (pipeline.c keeps the same lookup). */

/* Run the handler on a key this process owns, then finish it. */
static enum pl_rc ext_run(struct pipeline *pl, size_t topic_idx, struct pl_msg *m, const char *mctx,
                          int attempt, enum outcome *out, char *err, size_t errsz)
{
        const struct topic_conf *t = &pl->cfg->topics[topic_idx];
        struct handler *h = &pl->handlers[topic_idx];
        const struct dedupd_handler *d = h->desc;
        struct store *s = pl->store;
        const char *ns = pl->cfg->namespace, *me = external_owner();
        PGconn *conn = s->conn;
        enum pl_rc ret = PL_OK;
        enum store_rc rc;
        dedupd_result_t r;

        fault_point("after_claim");
        /* The handler gets dedupd's connection in autocommit: for reads and
         * its own bookkeeping, committed statement by statement. */
        struct dedupd_ctx ctx = {.conn = conn, .idem_key = m->idem_key, .log_prefix = h->log_prefix};
        struct dedupd_msg dm = {m->topic,     m->partition, m->offset,  m->timestamp_ms,
                                m->key,       m->key_len,   m->value,   m->value_len,
                                m->headers,   m->header_cnt, m->idem_key};
        if (d->handle) {
                r = d->handle(h->state, &ctx, &dm);
        } else {
                struct dedupd_ctx *cp = &ctx;
                const struct dedupd_msg *mp = &dm;
                dedupd_result_t one = DEDUPD_RETRY;
                r = d->handle_batch(h->state, &cp, &mp, 1, &one);
                if (r == DEDUPD_OK)
                        r = one;
        }
        fault_point("in_handler");

        if (PQstatus(conn) != CONNECTION_OK) {
                /* The lease stays; after reconnecting this process finds its
                 * own row and resumes it (the handler runs again, with the key). */
                snprintf(err, errsz, "database connection lost in the handler of key %s", m->idem_key);
                ret = PL_DB_DOWN;
                goto out;
        }
        int in_txn = PQtransactionStatus(conn) != PQTRANS_IDLE;
        if (in_txn)
                store_rollback(s);
        if ((r == DEDUPD_OK || r == DEDUPD_REJECT) && !in_txn) {
                const char *status = r == DEDUPD_OK ? "DONE" : "FAILED";
                const char *resp = ctx.response ? ctx.response : r == DEDUPD_REJECT ? "rejected" : NULL;
                int finished;
                if ((rc = store_ext_finish(s, ns, m->idem_key, me, status, resp, &finished, err, errsz))) {
                        ret = db_fail(rc);
                        goto out;
                }
                if (finished) {
                        *out = r == DEDUPD_OK ? O_APPLIED : O_REJECTED;
                        if (r == DEDUPD_REJECT)
                                log_info(mctx, "key %s rejected: %s", m->idem_key, resp);
                        else if (attempt > 1)
                                log_info(mctx, "offset %lld: key %s finished %s on attempt %d: %s",
                                         (long long)m->offset, m->idem_key, status, attempt,
                                         resp ? resp : "(no response)");
                        goto out;
                }
                /* Fenced: someone took the key while the effect ran here. */
                struct store_ext_row row;
                int found = 0;
                char rerr[256];
                if (store_ext_read(s, ns, m->idem_key, &row, &found, rerr, sizeof(rerr)))
                        found = 0;
                ext.stats.lost_leases++;
                log_error(mctx,
                          "offset %lld: key %s: lost lease — another owner took the key while the "
                          "effect ran here (now %s, owner %s, attempt %d); this attempt's outcome (%s) "
                          "is not recorded and the row is left as it is; the effect may have happened "
                          "twice unless the downstream dedups by the key (%" PRIu64 " lost since start)",
                          (long long)m->offset, m->idem_key, found ? row.status : "gone",
                          found && row.owner[0] ? row.owner : "none", found ? row.attempts : 0, status,
                          ext.stats.lost_leases);
                *out = O_LOST;
                goto out;
        }

        m->attempts++;
        if (in_txn)
                snprintf(err, errsz,
                         "handler left a transaction open on the autocommit connection for key %s; "
                         "rolled back, treated as RETRY",
                         m->idem_key);
        else if (r != DEDUPD_RETRY)
                snprintf(err, errsz, "handler returned unknown result %d for key %s", (int)r, m->idem_key);
        else
                snprintf(err, errsz, "handler asked to retry key %s", m->idem_key);
        log_warn(mctx, "offset %lld: %s (attempt %d of %d)", (long long)m->offset, err, m->attempts,
                 t->retry_max_attempts);
        /* Give the lease up so the retry (here or anywhere) may take over at once. */
        char rerr[256];
        if ((rc = store_ext_release(s, ns, m->idem_key, me, rerr, sizeof(rerr))) == STORE_CONN) {
                ret = PL_DB_DOWN;
                goto out;
        }
        ret = PL_RETRY;
out:
        host_ctx_reset(&ctx);
        return ret;
}

/* An EXPIRED key met with on_expired: dead-letter. */
static enum pl_rc ext_dead_letter_expired(struct pipeline *pl, const struct topic_conf *t,
                                          struct pl_msg *m, const char *mctx, enum outcome *out,
                                          char *err, size_t errsz)
{
        struct pl_msg *one[1] = {m};
        free(m->dlq_reason);
        m->dlq_reason = strdup(IN_DOUBT_REASON);
        if (!m->dlq_reason) {
                snprintf(err, errsz, "out of memory");
                return PL_RETRY;
        }
        if (pl->ops.dead_letter(pl->ops.opaque, t->dlq_topic, pl->cfg->namespace, one, 1, err, errsz))
                return PL_DLQ_FAILED; /* dlq_reason stays: the retry dead-letters it first */
        m->dead_lettered = 1;
        ext.stats.expired_dead_lettered++;
        log_warn(mctx, "offset %lld: key %s is EXPIRED (in doubt): dead-lettered to %s for "
                       "reconciliation (on_expired: dead-letter)",
                 (long long)m->offset, m->idem_key, t->dlq_topic);
        *out = O_DEAD_LETTERED;
        return PL_OK;
}

/* A duplicate whose payload differs from the first one's: a key-design or
 * client bug, handled by fingerprint.on_mismatch as in transactional mode. */
static enum pl_rc ext_mismatch(struct pipeline *pl, const struct topic_conf *t, struct pl_msg *m,
                               const struct store_ext_row *row, const char *mctx, enum outcome *out,
                               char *err, size_t errsz)
{
        log_warn(mctx, "key %s: fingerprint mismatch at offset %lld: first %.16s…, this message %.16s… (%s)",
                 m->idem_key, (long long)m->offset, row->fingerprint, m->fingerprint,
                 t->on_mismatch == MISMATCH_DEAD_LETTER ? "dead-lettered" : "absorbed");
        if (t->on_mismatch != MISMATCH_DEAD_LETTER) {
                *out = O_MISMATCH;
                return PL_OK;
        }
        struct pl_msg *one[1] = {m};
        snprintf(m->stored_fingerprint, sizeof(m->stored_fingerprint), "%s", row->fingerprint);
        free(m->dlq_reason);
        m->dlq_reason = strdup("fingerprint mismatch: same key, different payload");
        if (!m->dlq_reason) {
                snprintf(err, errsz, "out of memory");
                return PL_RETRY;
        }
        if (pl->ops.dead_letter(pl->ops.opaque, t->dlq_topic, pl->cfg->namespace, one, 1, err, errsz))
                return PL_DLQ_FAILED; /* dlq_reason stays: the retry dead-letters it first */
        m->dead_lettered = 1;
        *out = O_MISMATCH_DEAD_LETTERED;
        return PL_OK;
}

/* Claim one message's key (or learn why not), run it, finish it. */
static enum pl_rc ext_one(struct pipeline *pl, size_t topic_idx, struct pl_msg *m, enum outcome *out,
                          char *err, size_t errsz)
{
        const struct topic_conf *t = &pl->cfg->topics[topic_idx];
        struct store *s = pl->store;
        const char *ns = pl->cfg->namespace, *me = external_owner();
        int64_t keep = t->retention ? t->retention->keep_ms : 0;
        int64_t ttl = t->retention ? t->retention->response_ttl_ms : 0;
        struct store_ext_row row;
        enum store_rc rc;
        int claimed, found, attempts;
        char mctx[200];

        snprintf(mctx, sizeof(mctx), "topic:%s/%d", t->name, (int)m->partition);
        /* Twice at most: a row purged between the claim and the read is claimed again. */
        for (int tries = 0; tries < 2; tries++) {
                if ((rc = store_ext_claim(s, ns, m->idem_key, m->topic, m->partition, m->offset,
                                          m->fingerprint, me, t->lease_ms, keep, ttl, &claimed, err,
                                          errsz)))
                        return db_fail(rc);
                if (claimed) {
                        ext.stats.claimed++;
                        return ext_run(pl, topic_idx, m, mctx, 1, out, err, errsz);
                }
                if ((rc = store_ext_read(s, ns, m->idem_key, &row, &found, err, errsz)))
                        return db_fail(rc);
                if (found)
                        break;
        }
        if (!found) {
                snprintf(err, errsz, "key %s could be neither claimed nor read", m->idem_key);
                return PL_RETRY;
        }

        if (!strcmp(row.status, "DONE") || !strcmp(row.status, "FAILED")) {
                if (row.fingerprint[0] && strcmp(row.fingerprint, m->fingerprint))
                        return ext_mismatch(pl, t, m, &row, mctx, out, err, errsz);
                log_debug(mctx, "duplicate %s absorbed; first outcome %s: %s", m->idem_key, row.status,
                          row.response[0] ? row.response : "(no response)");
                *out = O_DUPLICATE;
                return PL_OK;
        }
        if (!strcmp(row.status, "EXPIRED")) {
                switch (t->on_expired) {
                case EXPIRED_DEAD_LETTER:
                        return ext_dead_letter_expired(pl, t, m, mctx, out, err, errsz);
                case EXPIRED_SKIP:
                        ext.stats.expired_skipped++;
                        log_warn(mctx, "offset %lld: key %s is EXPIRED (in doubt): acknowledged without "
                                       "running the handler (on_expired: skip)",
                                 (long long)m->offset, m->idem_key);
                        *out = O_SKIPPED;
                        return PL_OK;
                case EXPIRED_REEXECUTE:
                        if ((rc = store_ext_take_over(s, ns, m->idem_key, me, t->lease_ms, 1, &attempts,
                                                      err, errsz)))
                                return db_fail(rc);
                        if (!attempts) {
                                snprintf(err, errsz, "offset %lld: key %s was EXPIRED and another "
                                                     "instance re-executes it: backing off",
                                         (long long)m->offset, m->idem_key);
                                return PL_RETRY;
                        }
                        ext.stats.expired_reexecuted++;
                        log_warn(mctx, "offset %lld: key %s was EXPIRED (in doubt): re-executing "
                                       "(on_expired: reexecute), attempt %d",
                                 (long long)m->offset, m->idem_key, attempts);
                        return ext_run(pl, topic_idx, m, mctx, attempts, out, err, errsz);
                }
        }
        /* PENDING */
        if (row.live && strcmp(row.owner, me)) {
                ext.stats.lease_waits++;
                snprintf(err, errsz,
                         "offset %lld: key %s is PENDING under a live lease (owner %s, until %s, "
                         "attempt %d): not acknowledged, backing off",
                         (long long)m->offset, m->idem_key, row.owner, row.lease_until, row.attempts);
                return PL_RETRY;
        }
        if ((rc = store_ext_take_over(s, ns, m->idem_key, me, t->lease_ms, 0, &attempts, err, errsz)))
                return db_fail(rc);
        if (!attempts) {
                snprintf(err, errsz, "offset %lld: key %s: another instance took the expired lease first: "
                                     "backing off",
                         (long long)m->offset, m->idem_key);
                return PL_RETRY;
        }
        ext.stats.taken_over++;
        if (strcmp(row.owner, me))
                log_warn(mctx, "offset %lld: key %s: the lease of %s ran out at %s; taken over by "
                               "compare-and-set (attempt %d)",
                         (long long)m->offset, m->idem_key, row.owner[0] ? row.owner : "(none)",
                         row.lease_until, attempts);
        else
                log_info(mctx, "offset %lld: key %s: this process takes its own released or "
                               "interrupted lease back (attempt %d)",
                         (long long)m->offset, m->idem_key, attempts);
        return ext_run(pl, topic_idx, m, mctx, attempts, out, err, errsz);
}


enum pl_rc external_process(struct pipeline *pl, size_t topic_idx, struct pl_msg *const *msgs,
                            size_t n, struct pl_commit *commits, size_t *ncommits, char *err,
                            size_t errsz)
{
        const struct topic_conf *t = &pl->cfg->topics[topic_idx];
        struct store *s = pl->store;
        enum pl_rc ret = PL_OK;
        enum store_rc rc;
        char ctxname[200], merr[1024];
        size_t ndlq = 0, nprog = 0, nblocked = 0, processed = 0;

        int *skip = calloc(n ? n : 1, sizeof(*skip));
        int32_t *blocked = calloc(n ? n : 1, sizeof(*blocked));
        struct pl_msg **dlq = calloc(n ? n : 1, sizeof(*dlq));
        struct store_progress *prog = calloc(n ? n : 1, sizeof(*prog));

        *ncommits = 0;
        snprintf(ctxname, sizeof(ctxname), "topic:%s", t->name);
        if (!skip || !blocked || !dlq || !prog) {
                snprintf(err, errsz, "out of memory");
                ret = PL_RETRY;
                goto out;
        }

        /* 1. a partial batch comes back: what this process committed of it is done */
        for (size_t i = 0; i < n; i++) {
                struct part_state *ps = pipeline_part_state(pl, topic_idx, msgs[i]->partition);
                skip[i] = ps && ps->verified_next > msgs[i]->offset;
        }

        /* 2. keys; what cannot be processed is dead-lettered first (acknowledged
         *    by the broker before its offset can be committed) */
        for (size_t i = 0; i < n; i++) {
                if (skip[i])
                        continue;
                pipeline_prepare(t, msgs[i]);
                if (msgs[i]->dlq_reason && !msgs[i]->dead_lettered)
                        dlq[ndlq++] = msgs[i];
        }
        if (ndlq) {
                if (pl->ops.dead_letter(pl->ops.opaque, t->dlq_topic, pl->cfg->namespace, dlq, ndlq, err,
                                        errsz)) {
                        ret = PL_DLQ_FAILED;
                        goto out;
                }
                fault_point("after_dlq");
                for (size_t i = 0; i < ndlq; i++) {
                        dlq[i]->dead_lettered = 1;
                        log_warn(ctxname, "partition %d offset %lld dead-lettered to %s: %s",
                                 (int)dlq[i]->partition, (long long)dlq[i]->offset, t->dlq_topic,
                                 dlq[i]->dlq_reason);
                }
        }

        /* 3. one message at a time, in partition-offset order; a message that
         *    cannot be finished now stops its partition, not the others */
        for (size_t i = 0; i < n; i++) {
                struct pl_msg *m = msgs[i];
                enum outcome o = O_DEAD_LETTERED;
                int stopped = 0;
                if (skip[i])
                        continue;
                for (size_t b = 0; b < nblocked && !stopped; b++)
                        stopped = blocked[b] == m->partition;
                if (stopped)
                        continue;
                if (!m->dlq_reason) {
                        char what[200];
                        snprintf(what, sizeof(what), "key %s of %s", m->idem_key, t->name);
                        watchdog_arm(pl->watchdog, s->conn, t->batch_timeout_ms, what);
                        merr[0] = '\0';
                        enum pl_rc r = ext_one(pl, topic_idx, m, &o, merr, sizeof(merr));
                        watchdog_disarm(pl->watchdog);
                        if (r != PL_OK) {
                                blocked[nblocked++] = m->partition;
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
                struct store_progress *p = pipeline_progress_of(prog, &nprog, t->name, m->partition);
                if (m->offset + 1 > p->next_offset)
                        p->next_offset = m->offset + 1;
                if (m->offset < p->from_offset)
                        p->from_offset = m->offset;
                p->consumed++;
                processed++;
                if (o == O_APPLIED)
                        p->applied++;
                else if (o == O_REJECTED)
                        p->rejected++;
                else if (o == O_DUPLICATE || o == O_SKIPPED)
                        p->duplicates++;
                else if (o == O_DEAD_LETTERED)
                        p->dead_lettered++;
                else if (o == O_MISMATCH) {
                        p->duplicates++;
                        p->mismatches++;
                } else if (o == O_MISMATCH_DEAD_LETTERED) {
                        p->dead_lettered++;
                        p->mismatches++;
                }
        }

        /* 4. progress of what was finished: one statement, its own transaction */
        if (!nprog || !store_ok(s))
                goto out;
        fault_point("before_commit");
        if ((rc = store_progress(s, pl->cfg->namespace, nprog, prog, merr, sizeof(merr)))) {
                /* Finished keys are in the table: their redelivery is absorbed. */
                if (ret == PL_OK || rc == STORE_CONN) {
                        snprintf(err, errsz, "%s", merr);
                        ret = db_fail(rc);
                }
                goto out;
        }
        fault_point("after_commit");

        /* 5. committed: where each partition may be acknowledged, even when
         *    another of the batch's messages stopped its partition */
        *ncommits = pipeline_committed(pl, topic_idx, prog, nprog, commits);
        pl->stats.batches++;
        pl->stats.consumed += processed;
        log_debug(ctxname, "external batch of %zu: %zu finished, %zu partition(s) stopped early", n,
                  processed, nblocked);
out:
        if (ret != PL_OK)
                pl->stats.retries++;
        free(skip);
        free(blocked);
        free(dlq);
        free(prog);
        return ret;
}

void external_reap_tick(struct pipeline *pl, int64_t now_ms)
{
        struct store *s = pl->store;
        char err[512], sample[400], ctx[200], d[64];

        if (ext.reaped_once && now_ms - ext.last_reap_ms < REAP_INTERVAL_MS)
                return;
        ext.reaped_once = 1;
        ext.last_reap_ms = now_ms;
        /* Between batches only, on an idle connection; a database that is down
         * is the consumer's business. */
        if (!store_ok(s) || PQtransactionStatus(s->conn) != PQTRANS_IDLE)
                return;
        for (size_t i = 0; i < pl->cfg->topic_cnt; i++) {
                const struct topic_conf *t = &pl->cfg->topics[i];
                size_t total = 0, got = 0;
                if (t->mode != MODE_EXTERNAL)
                        continue;
                sample[0] = '\0';
                for (int round = 0; round < REAP_MAX_ROUNDS; round++) {
                        if (store_ext_reap(s, pl->cfg->namespace, t->name, t->expire_grace_ms, REAP_BATCH,
                                           &got, sample, sizeof(sample), err, sizeof(err))) {
                                if (log_ratelimit_ok(&ext.rl_reap, 1, 60000))
                                        log_warn("reaper", "topic %s: %s", t->name, err);
                                break;
                        }
                        total += got;
                        if (got < REAP_BATCH)
                                break;
                }
                if (!total)
                        continue;
                ext.stats.expired_reaped += total;
                snprintf(ctx, sizeof(ctx), "topic:%s", t->name);
                log_warn(ctx,
                         "reaper: %zu PENDING key%s whose lease ran out more than %s ago marked EXPIRED "
                         "(in doubt: the effect may or may not have happened; reconcile): %s; "
                         "%" PRIu64 " since start",
                         total, total == 1 ? "" : "s",
                         config_format_duration(t->expire_grace_ms, d, sizeof(d)), sample,
                         ext.stats.expired_reaped);
        }
}
