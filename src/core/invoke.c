/* invoke: the handler inside dedupd's batch transaction — one message at a time under savepoints, or set-oriented — and the checks that it left the transaction and the session as dedupd's. */
#include "core/invoke.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "base/log.h"
#include "base/mem.h"
#include "core/host.h"
#include "core/steps.h"
#include "pg/savepoint.h"

/*
 * The contract says a handler never ends dedupd's transaction. Checked, not
 * trusted: after every call the transaction must still be open (a rollback
 * leaves none; a commit fails on the commit guard and leaves none), and
 * after the last the guard the claim put there must still be there (a
 * handler that ended the transaction and began another lost it). What the
 * handler did is then its message's failed attempt, or, where the call was
 * for a whole batch, a reason to split the batch.
 */
#define ENDED_TXN "handler ended dedupd's transaction (it ran COMMIT or ROLLBACK)"
#define NEW_TXN "handler ended dedupd's transaction and began another (it ran COMMIT or ROLLBACK, then BEGIN)"
#define LOST_SAVEPOINT "handler released or rolled back dedupd's savepoint, or ended its transaction"

struct call {
        struct pl_topic *pt;
        struct batch *b;
        char *err;
        size_t errsz;
};

static struct dedupd_msg handler_msg(const struct pl_entry *e)
{
        const struct pl_msg *m = e->msg;
        return (struct dedupd_msg){m->topic, m->partition, m->offset,  m->timestamp_ms, m->key,        m->key_len,
                                   m->value, m->value_len, m->headers, m->header_cnt,   e->st.idem_key};
}

static struct pl_state *fresh_state(const struct call *c, size_t j) { return &c->b->items[c->b->fresh[j]].e->st; }

/* Rolled back after the handler broke the batch: what it set on the session
 * outside dedupd's transaction goes too. */
static void roll_back(struct call *c)
{
        char rerr[256];
        int held;
        store_rollback(c->pt->store);
        if (store_ok(c->pt->store) && store_session_reset(c->pt->store, 0, &held, rerr, sizeof(rerr)))
                log_warn(c->pt->ctx, "resetting the session after the handler: %s", rerr);
}

/* The message of e failed this attempt (what: a phrase); the batch is retried. */
static enum pl_rc blame(struct call *c, struct pl_entry *e, const char *what)
{
        const struct pl_msg *m = e->msg;
        char mctx[256];
        step_attempt(&e->st, "%s", what);
        snprintf(c->err, c->errsz, "%s for key %s", what, e->st.idem_key);
        snprintf(mctx, sizeof(mctx), "topic:%s/%d", m->topic, (int)m->partition);
        log_warn(mctx, "offset %lld: %s (attempt %d of %d)", (long long)m->offset, c->err, e->st.attempts,
                 c->pt->t->retry_max_attempts);
        roll_back(c);
        return PL_RETRY;
}

/* The connection went away under the handler: not the messages' fault. */
static int lost_connection(struct call *c)
{
        if (store_ok(c->pt->store))
                return 0;
        snprintf(c->err, c->errsz, "database connection lost in the handler");
        return 1;
}

/* A statement of the handler met another transaction (host->exec failed
 * with a deadlock or a serialization failure): none of its messages' doing,
 * so none is charged an attempt and the batch is not split; it runs again
 * whole. Bounded: once retry.max_attempts attempts in a row ended so, the
 * next is judged as any failure is (a handler raising 40001 itself). */
static int contention(struct call *c)
{
        struct pl_topic *pt = c->pt;
        if (!store_last_contended(pt->store) || pt->contention_streak >= pt->t->retry_max_attempts)
                return 0;
        pt->contention_streak++;
        snprintf(c->err, c->errsz,
                 "a statement of the handler met another transaction (a deadlock or a serialization failure)");
        roll_back(c);
        return 1;
}

/* What one message's result means, told by the handler and by the transaction. */
static const char *retry_phrase(dedupd_result_t r, int aborted)
{
        if ((int)r == DEDUPD_EXEC_FATAL)
                return "a statement of the handler failed (logged with its SQLSTATE)";
        if (r != DEDUPD_OK && r != DEDUPD_REJECT && r != DEDUPD_RETRY)
                return "handler returned an unknown result";
        return aborted ? "handler left the transaction aborted (an SQL error)" : "handler returned RETRY";
}

/* 6a. A set-oriented handler: every fresh message in one call. An attempt
 *     for each message it named (left at RETRY or given no valid result); a
 *     whole batch it asked to retry without naming one counts for each. */
static enum pl_rc judge_batch(struct call *c, dedupd_result_t br, const dedupd_result_t *res, size_t n)
{
        enum store_txn st = store_txn(c->pt->store);
        size_t named = 0;
        for (size_t j = 0; j < n; j++)
                named += res[j] != DEDUPD_OK && res[j] != DEDUPD_REJECT;
        if (st == STORE_TXN_ABORTED && contention(c))
                return PL_RETRY;
        if (st == STORE_TXN_NONE || (st == STORE_TXN_ABORTED && !named)) {
                /* Which message did it is not known: split.c narrows the batch to find it. */
                snprintf(c->err, c->errsz, "%s",
                         st == STORE_TXN_NONE ? ENDED_TXN : "handler left the transaction aborted (an SQL error)");
                roll_back(c);
                return PL_SPLIT;
        }
        if (br != DEDUPD_RETRY && !named && st == STORE_TXN_OPEN) {
                for (size_t j = 0; j < n; j++)
                        c->b->items[c->b->fresh[j]].state = res[j] == DEDUPD_OK ? ITEM_APPLIED : ITEM_REJECTED;
                return PL_OK;
        }
        for (size_t j = 0; j < n; j++)
                if (!named || (res[j] != DEDUPD_OK && res[j] != DEDUPD_REJECT))
                        step_attempt(fresh_state(c, j), "%s", retry_phrase(res[j], st == STORE_TXN_ABORTED));
        snprintf(c->err, c->errsz, "handle_batch asked to retry %zu of %zu messages%s", named ? named : n, n,
                 st == STORE_TXN_ABORTED ? " (it left the transaction aborted)" : "");
        store_rollback(c->pt->store);
        return PL_RETRY;
}

static enum pl_rc run_handle_batch(struct call *c)
{
        struct handler *h = c->pt->handler;
        size_t n = c->b->nfresh;
        struct dedupd_msg *dms = xcalloc(n, sizeof(*dms)); /* n: up to 100,000 */
        const struct dedupd_msg **dm = xcalloc(n, sizeof(*dm));
        struct dedupd_ctx **dc = xcalloc(n, sizeof(*dc));
        dedupd_result_t *res = xcalloc(n, sizeof(*res));
        enum pl_rc rc;

        for (size_t j = 0; j < n; j++) {
                struct batch_item *it = &c->b->items[c->b->fresh[j]];
                dms[j] = handler_msg(it->e);
                dm[j] = &dms[j];
                dc[j] = &it->ctx;
                res[j] = DEDUPD_RETRY;
        }
        dedupd_result_t br = h->desc->handle_batch(h->state, dc, dm, n, res);
        for (size_t j = 0; j < n; j++)
                host_ctx_release(&dc[j]->head);
        fault_point("in_handler");
        rc = lost_connection(c) ? step_fail(c->pt->store, STORE_CONN) : judge_batch(c, br, res, n);
        free(dms);
        free(dm);
        free(dc);
        free(res);
        return rc;
}

/* The message's savepoint after a handler call; its failure (other than the
 * connection's) is the handler's doing. */
static enum pl_rc savepoint(struct call *c, struct pl_entry *e, enum store_savepoint op)
{
        enum store_rc rc = store_savepoint(c->pt->store, op, c->err, c->errsz);
        if (rc == STORE_OK)
                return PL_OK;
        if (rc == STORE_CONN)
                return step_fail(c->pt->store, rc);
        return blame(c, e, LOST_SAVEPOINT);
}

/* What one handle() call did to the item and to the transaction. */
static enum pl_rc judge_one(struct call *c, size_t j, dedupd_result_t r, int sp)
{
        struct batch_item *it = &c->b->items[c->b->fresh[j]];
        enum store_txn st = store_txn(c->pt->store);
        if (st == STORE_TXN_NONE)
                return blame(c, it->e, ENDED_TXN);
        switch (batch_verdict(r, st == STORE_TXN_ABORTED, sp)) {
        case VERDICT_REJECTED: it->state = ITEM_REJECTED; return sp ? savepoint(c, it->e, STORE_SAVEPOINT_UNDO) : PL_OK;
        case VERDICT_APPLIED:
                it->state = ITEM_APPLIED;
                return sp && j + 1 < c->b->nfresh ? savepoint(c, it->e, STORE_SAVEPOINT_NEXT) : PL_OK;
        case VERDICT_RETRY: break;
        }
        if (st == STORE_TXN_ABORTED && contention(c))
                return PL_RETRY;
        return blame(c, it->e, retry_phrase(r, st == STORE_TXN_ABORTED));
}

/* 6b. One message at a time, each under a savepoint (unless the handler
 *     rejects cleanly), so a REJECT leaves no change. */
static enum pl_rc run_handle(struct call *c)
{
        struct handler *h = c->pt->handler;
        int sp = !(h->desc->flags & DEDUPD_HANDLER_F_CLEAN_REJECT);
        enum store_rc rc;
        enum pl_rc ret = PL_OK;

        if (sp && (rc = store_savepoint(c->pt->store, STORE_SAVEPOINT_SET, c->err, c->errsz)))
                return step_fail(c->pt->store, rc);
        for (size_t j = 0; j < c->b->nfresh && ret == PL_OK; j++) {
                struct batch_item *it = &c->b->items[c->b->fresh[j]];
                struct dedupd_msg dm = handler_msg(it->e);
                dedupd_result_t r = h->desc->handle(h->state, &it->ctx, &dm);
                host_ctx_release(&it->ctx.head);
                fault_point("in_handler");
                ret = lost_connection(c) ? step_fail(c->pt->store, STORE_CONN) : judge_one(c, j, r, sp);
        }
        return ret;
}

/* After the last call: the session back to dedupd's, the guard taken off —
 * and found, or the transaction is no longer the batch's. */
static enum pl_rc handler_done(struct call *c)
{
        int held = 0;
        enum store_rc rc = store_session_reset(c->pt->store, 1, &held, c->err, c->errsz);
        if (rc)
                return step_fail(c->pt->store, rc);
        if (held)
                return PL_OK;
        snprintf(c->err, c->errsz, "%s", NEW_TXN);
        roll_back(c);
        return PL_SPLIT; /* which message did it is not known */
}

enum pl_rc invoke_handler(struct pl_topic *pt, struct batch *b, char *err, size_t errsz)
{
        struct call c = {pt, b, err, errsz};
        const struct dedupd_handler *d = pt->handler->desc;
        enum pl_rc rc;
        for (size_t j = 0; j < b->nfresh; j++) {
                struct batch_item *it = &b->items[b->fresh[j]];
                it->ctx = (struct dedupd_ctx){.head = {&host_api, pt->store, NULL},
                                              .sink = pt->sink,
                                              .idem_key = it->e->st.idem_key,
                                              .log_prefix = pt->handler->log_prefix,
                                              .ns = pt->cfg->namespace};
        }
        if (!b->nfresh)
                return PL_OK;
        int batch = d->handle_batch && !(pt->t->handler_per_message && d->handle);
        if ((rc = batch ? run_handle_batch(&c) : run_handle(&c)))
                return rc;
        return handler_done(&c);
}
