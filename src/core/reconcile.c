/* reconcile: asking a handler's reconcile() whether an in-doubt key's effect happened, and recording its answer. */
#include "core/reconcile.h"

#include <inttypes.h>
#include <stdio.h>

#include "base/log.h"
#include "core/host.h"
#include "ops/metrics.h"
#include "pg/reconcile.h"

static const char *const answer_names[] = {"done", "failed", "reexecute", "unknown"};

/* The handler's answer, or UNKNOWN for one it may not give (a value out
 * of the enum, a transaction left open). */
static enum reconcile_outcome ask(struct handler *h, struct store *s, const struct topic_conf *t,
                                  const struct reconcile_key *k, struct dedupd_ctx *ctx)
{
        struct dedupd_in_doubt key = {k->idem_key, t->name, k->partition, k->offset, k->attempts, k->reconciled};
        dedupd_reconcile_t v = h->desc->reconcile(h->state, ctx, &key);
        int held;
        char rerr[256];
        host_ctx_release(&ctx->head);
        if (!store_idle(s)) {
                store_rollback(s);
                log_warn(h->log_prefix, "reconcile() left a transaction open for key %s: rolled back, taken as unknown",
                         k->idem_key);
                v = DEDUPD_RECONCILE_UNKNOWN;
        }
        if (store_session_reset(s, 0, &held, rerr, sizeof(rerr)))
                log_warn(h->log_prefix, "key %s: resetting the session after reconcile(): %s", k->idem_key, rerr);
        switch (v) {
        case DEDUPD_RECONCILE_DONE: return RECONCILE_DONE;
        case DEDUPD_RECONCILE_FAILED: return RECONCILE_FAILED;
        case DEDUPD_RECONCILE_REEXECUTE: return RECONCILE_REEXECUTE;
        case DEDUPD_RECONCILE_UNKNOWN: break;
        default:
                log_warn(h->log_prefix, "reconcile() returned unknown answer %d for key %s: taken as unknown", (int)v,
                         k->idem_key);
        }
        return RECONCILE_UNKNOWN;
}

static enum key_status status_of(enum reconcile_outcome o)
{
        switch (o) {
        case RECONCILE_DONE: return KEY_DONE;
        case RECONCILE_FAILED: return KEY_FAILED;
        case RECONCILE_REEXECUTE: return KEY_PENDING;
        default: return KEY_EXPIRED;
        }
}

static void log_answer(const struct topic_conf *t, const struct reconcile_key *k, enum reconcile_outcome o,
                       const char *response)
{
        char ctx[200];
        snprintf(ctx, sizeof(ctx), "topic:%s", t->name);
        if (o == RECONCILE_MOVED)
                log_info(ctx, "key %s: answered elsewhere while reconcile() ran here; left as it is", k->idem_key);
        else if (o == RECONCILE_UNKNOWN)
                log_info(ctx, "key %s is in doubt and reconcile() could not tell (try %d of %d)", k->idem_key,
                         k->reconciled + 1, t->reconcile_tries);
        else
                log_warn(ctx, "key %s was in doubt (attempt %d, offset %" PRId64 "): reconcile() says %s%s%s",
                         k->idem_key, k->attempts, k->offset, answer_names[o], response ? ": " : "",
                         response ? response : "");
}

enum store_rc reconcile_key(struct handler *h, struct store *s, const char *ns, const struct topic_conf *t,
                            const struct reconcile_key *k, enum reconcile_outcome *out, char *err, size_t errsz)
{
        struct dedupd_ctx ctx = {.head = {&host_api, s, NULL}, .idem_key = k->idem_key, .log_prefix = h->log_prefix};
        enum reconcile_outcome o = ask(h, s, t, k, &ctx);
        const char *response = ctx.response            ? ctx.response
                               : o == RECONCILE_DONE   ? "reconciled: done"
                               : o == RECONCILE_FAILED ? "reconciled: failed"
                                                       : NULL;
        int changed = 0;
        enum store_rc rc = store_reconciled(s, ns, k->idem_key, status_of(o), response, &changed, err, errsz);
        if (rc) {
                metrics_reconciled(t->name, "error");
        } else {
                metrics_reconciled(t->name, answer_names[o]);
                if (!changed)
                        o = RECONCILE_MOVED;
                log_answer(t, k, o, o == RECONCILE_DONE || o == RECONCILE_FAILED ? response : NULL);
                *out = o;
        }
        host_ctx_reset(&ctx);
        return rc;
}

size_t reconcile_round(struct handler *h, struct store *s, const char *ns, const struct topic_conf *t)
{
        struct store_in_doubt *rows = NULL;
        size_t n = 0, asked = 0;
        char err[512];
        if (store_in_doubt_due(s, ns, t->name, t->reconcile_tries, t->reconcile_budget, &rows, &n, err, sizeof(err))) {
                log_warn("reaper", "topic %s: reading the keys to reconcile: %s", t->name, err);
                return 0;
        }
        for (size_t i = 0; i < n; i++) {
                struct reconcile_key k = {rows[i].key, rows[i].partition, rows[i].offset, rows[i].attempts,
                                          rows[i].reconciled};
                enum reconcile_outcome o;
                asked++;
                if (reconcile_key(h, s, ns, t, &k, &o, err, sizeof(err)) == STORE_OK)
                        continue;
                log_warn("reaper", "topic %s: key %s: recording reconcile()'s answer: %s", t->name, k.idem_key, err);
                if (!store_ok(s))
                        break;
        }
        store_in_doubt_free(rows, n);
        return asked;
}
