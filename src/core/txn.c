/* txn: transactional mode (design §5) — one batch, one transaction: the claims, the handler's effects, the outcomes and the progress commit together. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"

#include "base/mem.h"
#include "base/log.h"
#include "core/batch.h"
#include "core/mode.h"
#include "core/steps.h"
#include "core/watchdog.h"
#include "pg/keys.h"
#include "pg/offsets.h"
#include "pg/outbox.h"

/* One batch in flight: the items, and where the batch stands. */
struct txn {
        struct pl_topic *pt;
        struct batch b;
        struct store_claim_row *claims; /* the batch's distinct keys, in claim order */
        char *err;
        size_t errsz;
};

/* A failed statement ends the batch: rolled back, retried. */
static enum pl_rc failed(struct txn *x, enum store_rc rc) { return step_fail(x->pt->store, rc); }

/* 1. Keys, and what must be dead-lettered. */
static void derive_keys(struct txn *x)
{
        for (size_t i = 0; i < x->b.n; i++)
                step_prepare(x->pt, x->b.items[i].msg);
}

/* 2. Dead letters first: their offsets are committed only after the broker
 *    acknowledged them. */
static enum pl_rc dead_letter_unkeyable(struct txn *x)
{
        struct pl_msg *todo[x->b.n ? x->b.n : 1];
        size_t n = 0;
        if (!batch_mark_dead_letters(&x->b))
                return PL_OK;
        for (size_t i = 0; i < x->b.n; i++)
                if (x->b.items[i].state == ITEM_DEAD_LETTER && !x->b.items[i].msg->dead_lettered)
                        todo[n++] = x->b.items[i].msg;
        return step_dead_letter(x->pt, todo, n, x->err, x->errsz) ? PL_DLQ_FAILED : PL_OK;
}

/* The stored outcome of one known key (the claim's keys are sorted: search). */
static void keep_outcome(void *opaque, const char *key, const char *status, const char *response,
                         const char *fingerprint)
{
        struct txn *x = opaque;
        size_t lo = 0, hi = x->b.nkeys;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                struct batch_item *it = &x->b.items[x->b.keys[mid]];
                int c = strcmp(it->msg->idem_key, key);
                if (c == 0) {
                        it->stored = (struct first_outcome){xstrdup(status), response ? xstrdup(response) : NULL,
                                                            fingerprint ? xstrdup(fingerprint) : NULL};
                        log_debug(x->pt->ctx, "duplicate %s absorbed; first outcome %s: %s", key, status,
                                  response ? response : "(no response)");
                        return;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
}

static const struct dedupd_header *find_header(const struct pl_msg *m, const char *name);

/* Per first item of a key: whether a duplicate of it needs the first
 * outcome — a message of that key asks for a reply, or the debug log shows
 * what each duplicate was answered. */
static int *wanted_outcomes(const struct txn *x)
{
        const char *h = x->pt->t->reply_header;
        int all = log_level_current >= LOG_DEBUG;
        int *want = xcalloc(x->b.n ? x->b.n : 1, sizeof(*want));
        for (size_t i = 0; (all || (h && *h)) && i < x->b.n; i++) {
                if (x->b.items[i].state == ITEM_DEAD_LETTER)
                        continue;
                const struct dedupd_header *to = all ? NULL : find_header(x->b.items[i].msg, h);
                if (all || (to && to->value && to->value_len))
                        want[x->b.items[i].first] = 1;
        }
        return want;
}

/* 4. BEGIN, watched, and every distinct key claimed in one statement, which
 *    also reads what the batch needs of the keys seen before: the first
 *    outcome where a reply needs it, else only where the fingerprint differs. */
static enum pl_rc claim(struct txn *x)
{
        struct pl_topic *pt = x->pt;
        const struct topic_conf *t = pt->t;
        size_t k = x->b.nkeys;
        int fresh[k ? k : 1];
        char what[200];
        enum store_rc rc;
        const struct store_claim_outcomes outcomes = {keep_outcome, x};
        int *want = wanted_outcomes(x);

        x->claims = xcalloc(k ? k : 1, sizeof(*x->claims));
        for (size_t j = 0; j < k; j++) {
                const struct pl_msg *m = x->b.items[x->b.keys[j]].msg;
                x->claims[j] = (struct store_claim_row){.key = m->idem_key, .key_text = m->key_text, .topic = m->topic,
                                                        .fingerprint = m->fingerprint, .partition = m->partition,
                                                        .offset = m->offset, .want_outcome = want[x->b.keys[j]]};
        }
        free(want);
        snprintf(what, sizeof(what), "batch of %zu from %s", x->b.n, t->name);
        watchdog_arm(pt->watchdog, store_conn(pt->store), t->batch_timeout_ms, what);
        if ((rc = store_begin(pt->store, x->err, x->errsz)) ||
            (rc = store_claim(pt->store, pt->cfg->namespace, x->claims, k, t->retention ? t->retention->keep_ms : 0,
                              t->retention ? t->retention->response_ttl_ms : 0, &outcomes, x->err, x->errsz)))
                return failed(x, rc);
        fault_point("after_claim");
        for (size_t j = 0; j < k; j++) {
                struct batch_item *it = &x->b.items[x->b.keys[j]];
                fresh[j] = x->claims[j].fresh;
                it->row = x->claims[j].row;
                if (x->claims[j].matched) /* stored with this very fingerprint */
                        it->stored.fingerprint = xstrdup(it->msg->fingerprint);
        }
        batch_claimed(&x->b, fresh);
        return PL_OK;
}

/* 5. Same key, another payload: counted, and absorbed or dead-lettered. The
 *    dead letters are written inside the transaction: if the broker does not
 *    acknowledge them, the batch rolls back and nothing is acknowledged. */
static enum pl_rc handle_mismatches(struct txn *x)
{
        struct pl_msg *letters[x->b.n ? x->b.n : 1];
        size_t n = 0;
        for (size_t i = 0; i < x->b.n; i++) {
                struct batch_item *it = &x->b.items[i];
                if (it->state != ITEM_REPEAT && it->state != ITEM_KNOWN)
                        continue;
                enum mismatch_verdict v = step_mismatch(x->pt, it->msg, batch_first_fingerprint(&x->b, it));
                it->mismatch = v != MISMATCH_NONE;
                if (v == MISMATCH_LETTER) {
                        it->state = ITEM_DEAD_LETTER;
                        letters[n++] = it->msg;
                }
        }
        if (!n || !step_dead_letter(x->pt, letters, n, x->err, x->errsz))
                return PL_OK;
        store_rollback(x->pt->store);
        for (size_t i = 0; i < n; i++) {
                free(letters[i]->dlq_reason);
                letters[i]->dlq_reason = NULL;
                letters[i]->stored_fingerprint[0] = '\0';
        }
        return PL_DLQ_FAILED;
}

static struct dedupd_msg handler_msg(const struct pl_msg *m)
{
        return (struct dedupd_msg){m->topic, m->partition, m->offset, m->timestamp_ms, m->key, m->key_len,
                                   m->value, m->value_len, m->headers, m->header_cnt, m->idem_key};
}

/* The connection went away under the handler: not the messages' fault. */
static int lost_connection(struct txn *x)
{
        if (store_ok(x->pt->store))
                return 0;
        snprintf(x->err, x->errsz, "database connection lost in the handler");
        return 1;
}

/* A retried batch: an attempt for each message the handler named (left at
 * RETRY or given no valid result), or for every one when it named none. */
static void count_attempts(struct txn *x, const dedupd_result_t *res, size_t n)
{
        size_t named = 0;
        for (size_t j = 0; j < n; j++)
                named += res[j] != DEDUPD_OK && res[j] != DEDUPD_REJECT;
        for (size_t j = 0; j < n; j++)
                if (!named || (res[j] != DEDUPD_OK && res[j] != DEDUPD_REJECT))
                        x->b.items[x->b.fresh[j]].msg->attempts++;
}

/* 6a. A set-oriented handler: every fresh message in one call. */
static enum pl_rc run_handle_batch(struct txn *x)
{
        struct handler *h = x->pt->handler;
        size_t n = x->b.nfresh;
        struct dedupd_msg dms[n];
        const struct dedupd_msg *dm[n];
        struct dedupd_ctx *dc[n];
        dedupd_result_t res[n];
        int retry = 0;

        for (size_t j = 0; j < n; j++) {
                struct batch_item *it = &x->b.items[x->b.fresh[j]];
                dms[j] = handler_msg(it->msg);
                dm[j] = &dms[j];
                dc[j] = &it->ctx;
                res[j] = DEDUPD_RETRY;
        }
        dedupd_result_t br = h->desc->handle_batch(h->state, dc, dm, n, res);
        fault_point("in_handler");
        if (lost_connection(x))
                return failed(x, STORE_CONN);
        int aborted = PQtransactionStatus(store_conn(x->pt->store)) == PQTRANS_INERROR;
        if (br == DEDUPD_RETRY || aborted) {
                snprintf(x->err, x->errsz, "handle_batch asked to retry the batch%s",
                         br == DEDUPD_RETRY ? "" : " (it left the transaction aborted)");
                retry = 1;
        }
        for (size_t j = 0; j < n && !retry; j++) {
                struct batch_item *it = &x->b.items[x->b.fresh[j]];
                if (res[j] == DEDUPD_OK || res[j] == DEDUPD_REJECT) {
                        it->state = res[j] == DEDUPD_OK ? ITEM_APPLIED : ITEM_REJECTED;
                        continue;
                }
                snprintf(x->err, x->errsz, "handle_batch result %d for key %s", (int)res[j], it->msg->idem_key);
                retry = 1;
        }
        if (!retry)
                return PL_OK;
        count_attempts(x, res, n);
        store_rollback(x->pt->store);
        return PL_RETRY;
}

/* The message that asked to be retried ends the batch. */
static enum pl_rc retry_message(struct txn *x, struct pl_msg *m, dedupd_result_t r, int aborted)
{
        char mctx[256];
        m->attempts++;
        if (r != DEDUPD_OK && r != DEDUPD_REJECT && r != DEDUPD_RETRY)
                snprintf(x->err, x->errsz, "handler returned unknown result %d for key %s", (int)r, m->idem_key);
        else if (aborted)
                snprintf(x->err, x->errsz,
                         "handler left the transaction aborted (an SQL error) for key %s; treated as RETRY",
                         m->idem_key);
        else
                snprintf(x->err, x->errsz, "handler asked to retry key %s", m->idem_key);
        snprintf(mctx, sizeof(mctx), "topic:%s/%d", m->topic, (int)m->partition);
        log_warn(mctx, "offset %lld: %s (attempt %d of %d)", (long long)m->offset, x->err, m->attempts,
                 x->pt->t->retry_max_attempts);
        store_rollback(x->pt->store);
        return PL_RETRY;
}

/* 6b. One message at a time, each under a savepoint (unless the handler
 *     rejects cleanly), so a REJECT leaves no change. */
static enum pl_rc run_handle(struct txn *x)
{
        struct handler *h = x->pt->handler;
        struct store *s = x->pt->store;
        int sp = !(h->desc->flags & DEDUPD_HANDLER_F_CLEAN_REJECT);
        enum store_rc rc;

        if (sp && (rc = store_exec(s, "SAVEPOINT dedupd_msg", x->err, x->errsz)))
                return failed(x, rc);
        for (size_t j = 0; j < x->b.nfresh; j++) {
                struct batch_item *it = &x->b.items[x->b.fresh[j]];
                struct dedupd_msg dm = handler_msg(it->msg);
                dedupd_result_t r = h->desc->handle(h->state, &it->ctx, &dm);
                fault_point("in_handler");
                if (lost_connection(x))
                        return failed(x, STORE_CONN);
                int aborted = PQtransactionStatus(store_conn(s)) == PQTRANS_INERROR;
                switch (batch_verdict(r, aborted, sp)) {
                case VERDICT_REJECTED:
                        if (sp && (rc = store_exec(s, "ROLLBACK TO SAVEPOINT dedupd_msg", x->err, x->errsz)))
                                return failed(x, rc);
                        it->state = ITEM_REJECTED;
                        break;
                case VERDICT_APPLIED:
                        it->state = ITEM_APPLIED;
                        if (sp && j + 1 < x->b.nfresh &&
                            (rc = store_exec(s, "RELEASE SAVEPOINT dedupd_msg; SAVEPOINT dedupd_msg", x->err, x->errsz)))
                                return failed(x, rc);
                        break;
                case VERDICT_RETRY:
                        return retry_message(x, it->msg, r, aborted);
                }
        }
        return PL_OK;
}

/* 6. The handler, for the fresh messages in partition-offset order. */
static enum pl_rc run_handler(struct txn *x)
{
        struct pl_topic *pt = x->pt;
        for (size_t j = 0; j < x->b.nfresh; j++) {
                struct batch_item *it = &x->b.items[x->b.fresh[j]];
                it->ctx = (struct dedupd_ctx){.conn = store_conn(pt->store),
                                              .store = pt->store,
                                              .idem_key = it->msg->idem_key,
                                              .log_prefix = pt->handler->log_prefix,
                                              .ns = pt->cfg->namespace};
        }
        if (!x->b.nfresh)
                return PL_OK;
        const struct dedupd_handler *d = pt->handler->desc;
        int batch = d->handle_batch && !(pt->t->handler_per_message && d->handle);
        return batch ? run_handle_batch(x) : run_handle(x);
}

/* 7. Final statuses and first responses, in bulk. Claimed rows say DONE
 *    already (in this mode nobody sees a PENDING row: the claim and the
 *    effect are one transaction); only a rejection or a response is written. */
static enum pl_rc record_outcomes(struct txn *x)
{
        size_t n = x->b.nfresh, k = 0;
        const char *rows[n ? n : 1], *statuses[n ? n : 1], *responses[n ? n : 1];
        enum store_rc rc;
        for (size_t j = 0; j < n; j++) {
                const struct batch_item *it = &x->b.items[x->b.fresh[j]];
                if (it->state == ITEM_APPLIED && !it->ctx.response)
                        continue;
                rows[k] = it->row;
                statuses[k] = batch_status(it);
                responses[k++] = batch_response(it);
        }
        if ((rc = store_record(x->pt->store, k, rows, statuses, responses, x->err, x->errsz)))
                return failed(x, rc);
        return PL_OK;
}

static const struct dedupd_header *find_header(const struct pl_msg *m, const char *name)
{
        const struct dedupd_header *h = NULL;
        for (size_t k = 0; k < m->header_cnt; k++)
                if (!strcmp(m->headers[k].name, name))
                        h = &m->headers[k];
        return h;
}

/* The outcome, byte for byte as stored, to the topic the message named. */
static enum store_rc reply(struct txn *x, const struct pl_msg *m, const struct dedupd_header *to, const char *status,
                           const char *response, int duplicate)
{
        char topic[256];
        struct dedupd_header hdrs[3];
        size_t nh = 0;
        const struct dedupd_header *corr = find_header(m, x->pt->t->correlation_header);
        snprintf(topic, sizeof(topic), "%.*s", (int)to->value_len, (const char *)to->value);
        if (corr)
                hdrs[nh++] = *corr;
        hdrs[nh++] = (struct dedupd_header){"dedupd.status", status, strlen(status)};
        hdrs[nh++] = (struct dedupd_header){"dedupd.duplicate", duplicate ? "true" : "false", duplicate ? 4 : 5};
        const struct outbox_msg o = {m->idem_key, {topic, corr ? corr->value : NULL, corr ? corr->value_len : 0,
                                                   response, response ? strlen(response) : 0, hdrs, nh, NULL, 0}};
        return store_outbox_insert(x->pt->store, x->pt->cfg->namespace, &o, x->err, x->errsz);
}

/* 8. Replies: the first outcome, to whoever asked and named a reply topic. */
static enum pl_rc send_replies(struct txn *x)
{
        const struct topic_conf *t = x->pt->t;
        enum store_rc rc;
        for (size_t i = 0; t->reply_header && *t->reply_header && i < x->b.n; i++) {
                const struct batch_item *it = &x->b.items[i];
                const char *status, *response;
                if (it->state == ITEM_APPLIED || it->state == ITEM_REJECTED) {
                        status = batch_status(it);
                        response = batch_response(it);
                } else if (it->state == ITEM_REPEAT || it->state == ITEM_KNOWN) {
                        batch_first_outcome(&x->b, it, &status, &response);
                } else {
                        continue;
                }
                const struct dedupd_header *to = find_header(it->msg, t->reply_header);
                if (!to || !to->value || !to->value_len)
                        continue;
                if ((rc = reply(x, it->msg, to, status, response, it->state == ITEM_REPEAT || it->state == ITEM_KNOWN)))
                        return failed(x, rc);
                (*x->pt->outbox_pending)++;
        }
        for (size_t j = 0; j < x->b.nfresh; j++)
                *x->pt->outbox_pending += (size_t)x->b.items[x->b.fresh[j]].ctx.emitted;
        return PL_OK;
}

/* 9. Per-partition progress, in the same transaction. */
static enum pl_rc record_progress(struct txn *x)
{
        enum store_rc rc;
        batch_count(&x->b);
        if ((rc = store_progress(x->pt->store, x->pt->cfg->namespace, x->b.nprog, x->b.prog, x->err, x->errsz)))
                return failed(x, rc);
        return PL_OK;
}

/* 10. COMMIT. A lost acknowledgement is indistinguishable from a failed
 *     COMMIT: redelivery finds every key claimed if it did commit. */
static enum pl_rc commit(struct txn *x)
{
        enum store_rc rc;
        fault_point("before_commit");
        if ((rc = store_commit(x->pt->store, x->err, x->errsz)))
                return failed(x, rc);
        fault_point("after_commit");
        return PL_OK;
}

/* 11. Committed: where each partition may be acknowledged, and the report. */
static size_t committed(struct txn *x, struct pl_commit *commits)
{
        struct pl_topic *pt = x->pt;
        size_t nc = step_committed(pt, x->b.prog, x->b.nprog, commits);
        pt->stats->batches++;
        pt->stats->consumed += x->b.n;
        for (size_t j = 0; j < x->b.nfresh; j++) {
                const struct batch_item *it = &x->b.items[x->b.fresh[j]];
                if (it->state == ITEM_REJECTED)
                        log_info(pt->ctx, "key %s rejected: %s", it->msg->idem_key, batch_response(it));
        }
        log_debug(pt->ctx, "batch of %zu: %zu applied or rejected, %zu keys seen before", x->b.n, x->b.nfresh,
                  x->b.nkeys - x->b.nfresh);
        return nc;
}

static enum pl_rc txn_process(struct pl_topic *pt, struct pl_msg *const *msgs, size_t n, struct pl_commit *commits,
                              size_t *ncommits, char *err, size_t errsz)
{
        struct txn x = {.pt = pt, .err = err, .errsz = errsz};
        enum pl_rc rc;

        *ncommits = 0;
        batch_init(&x.b, pt->t, msgs, n);
        derive_keys(&x);
        if ((rc = dead_letter_unkeyable(&x)))
                goto out;
        batch_dedupe(&x.b);
        if ((rc = claim(&x)) || (rc = handle_mismatches(&x)) ||
            (rc = run_handler(&x)) || (rc = record_outcomes(&x)) || (rc = send_replies(&x)) ||
            (rc = record_progress(&x)) || (rc = commit(&x)))
                goto out;
        *ncommits = committed(&x, commits);
out:
        watchdog_disarm(pt->watchdog);
        if (rc != PL_OK)
                pt->stats->retries++;
        batch_free(&x.b);
        free(x.claims);
        return rc;
}

const struct mode mode_transactional = {"transactional", txn_process};
