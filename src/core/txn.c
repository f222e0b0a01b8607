/* txn: transactional mode (docs/design.md §5) — one batch, one transaction: the claims, the handler's effects, the outcomes and the progress commit together. */

/*
 * The keys are claimed optimistically: a probe finds which are stored, the
 * handler runs on the others, and only then is each fresh key inserted, once,
 * with its outcome (one heap tuple, no update after). The primary key is the
 * judge: a key another transaction committed since the probe (a zombie, a
 * second instance during a rebalance) makes that INSERT fail, and the batch
 * is rolled back and run again at once with the pessimistic claim (insert
 * first, ON CONFLICT DO NOTHING; the outcomes updated after the handler),
 * which cannot conflict: one extra attempt per conflict, no more.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"

#include "base/mem.h"
#include "base/log.h"
#include "base/timeline.h"
#include "core/batch.h"
#include "core/invoke.h"
#include "core/mode.h"
#include "core/provenance.h"
#include "core/tenants.h"
#include "core/reply.h"
#include "core/steps.h"
#include "core/watchdog.h"
#include "ops/metrics.h"
#include "pg/keys.h"
#include "pg/offsets.h"
#include "pg/outbox.h"
#include "pg/reruns.h"
#include "pg/parallel_positions.h"

/* One batch in flight: the items, and where the batch stands. */
struct txn {
        struct pl_topic *pt;
        struct batch b;
        struct store_claim_row *claims; /* the batch's distinct keys, in claim order */
        int pessimistic;                /* claim first (store_claim), after a conflict */
        int conflict;                   /* the keys' INSERT found one committed since the probe */
        const char **probed;            /* after a conflict: the keys the probe found fresh, sorted */
        size_t nprobed;
        int reported;   /* the conflict was logged */
        size_t retried; /* FAILED keys this attempt runs again (on_failed: retry) */
        char *err;
        size_t errsz;
};

/* A failed statement ends the batch: rolled back, retried; split to find
 * the message when it refused one of the batch's values. */
static enum pl_rc failed(struct txn *x, enum store_rc rc)
{
        if (rc == STORE_DATA)
                snprintf(x->err, x->errsz, "a statement of dedupd refused a value of it (%s)",
                         store_last_failure(x->pt->store));
        return step_fail(x->pt->store, rc);
}

/* 1 when key is one of the keys the probe found fresh before a conflict. */
static int probed_fresh(const struct txn *x, const char *key)
{
        size_t lo = 0, hi = x->nprobed;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(x->probed[mid], key);
                if (c == 0)
                        return 1;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return 0;
}

/* Once per conflict: which key another transaction claimed meanwhile, as the
 * pessimistic claim found it (known now, fresh to the probe); known 0 when
 * the retry did not get that far. */
static void report_conflict(struct txn *x, int known)
{
        const char *key = NULL;
        size_t more = 0;
        if (!x->conflict || x->reported)
                return;
        x->reported = 1;
        for (size_t j = 0; known && j < x->b.nkeys; j++) {
                const struct batch_item *it = &x->b.items[x->b.keys[j]];
                if (it->state != ITEM_KNOWN || !probed_fresh(x, it->e->st.idem_key))
                        continue;
                if (key)
                        more++;
                else
                        key = it->e->st.idem_key;
        }
        if (!key)
                log_info(x->pt->ctx, "a key of the batch was claimed by another transaction meanwhile: batch retried "
                                     "with a pessimistic claim");
        else if (!more)
                log_info(x->pt->ctx,
                         "key %s was claimed by another transaction meanwhile: batch retried with a "
                         "pessimistic claim",
                         key);
        else
                log_info(x->pt->ctx,
                         "key %s (and %zu more) was claimed by another transaction meanwhile: batch "
                         "retried with a pessimistic claim",
                         key, more);
}

/* 1. Keys, and what must be dead-lettered. */
static enum pl_rc derive_keys(struct txn *x)
{
        for (size_t i = 0; i < x->b.n; i++)
                step_prepare(x->pt, x->b.items[i].e);
        return PL_OK;
}

/* 2. Dead letters first: their offsets are committed only after the broker
 *    acknowledged them. */
static enum pl_rc dead_letter_unkeyable(struct txn *x)
{
        size_t n = 0;
        if (!batch_mark_dead_letters(&x->b))
                return PL_OK;
        struct pl_entry **todo = xcalloc(x->b.n, sizeof(*todo));
        for (size_t i = 0; i < x->b.n; i++)
                if (x->b.items[i].state == ITEM_DEAD_LETTER && !x->b.items[i].e->st.dead_lettered)
                        todo[n++] = x->b.items[i].e;
        enum pl_rc rc = step_dead_letter(x->pt, todo, n, x->err, x->errsz) ? PL_DLQ_FAILED : PL_OK;
        free(todo);
        return rc;
}

/* The stored outcome of one known key (the claim's keys are sorted: search). */
static void keep_outcome(void *opaque, const char *key, enum key_status status, const char *response,
                         const char *fingerprint)
{
        struct txn *x = opaque;
        size_t lo = 0, hi = x->b.nkeys;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                struct batch_item *it = &x->b.items[x->b.keys[mid]];
                int c = strcmp(it->e->st.idem_key, key);
                if (c == 0) {
                        it->stored = (struct first_outcome){status, response ? xstrdup(response) : NULL,
                                                            fingerprint ? xstrdup(fingerprint) : NULL};
                        log_debug(x->pt->ctx, "duplicate %s absorbed; first outcome %s: %s", key,
                                  key_status_name(status), response ? response : "(no response)");
                        return;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
}

/* Per first item of a key: whether a duplicate of it needs the first
 * outcome — a message of that key asks for a reply, or the debug log shows
 * what each duplicate was answered. */
static int *wanted_outcomes(const struct txn *x)
{
        const struct topic_conf *t = x->pt->t;
        int all = log_level_current >= LOG_DEBUG;
        int *want = xcalloc(x->b.n ? x->b.n : 1, sizeof(*want));
        for (size_t i = 0; (all || (t->reply_header && *t->reply_header)) && i < x->b.n; i++)
                if (x->b.items[i].state != ITEM_DEAD_LETTER && (all || reply_wanted(t, x->b.items[i].e->msg)))
                        want[x->b.items[i].first] = 1;
        return want;
}

/* on_failed: retry — the batch's keys FAILED longer ago than
 * on_failed_after go (each recorded in dedupd.reruns), so the claim finds
 * them fresh and the handler runs on them; no statement when absorbed. */
static enum store_rc retry_failed(struct txn *x)
{
        const struct topic_conf *t = x->pt->t;
        char reason[128], d[64];
        x->retried = 0;
        if (t->on_failed != FAILED_RETRY || !x->b.nkeys)
                return STORE_OK;
        const char **keys = xcalloc(x->b.nkeys, sizeof(*keys));
        for (size_t j = 0; j < x->b.nkeys; j++)
                keys[j] = x->b.items[x->b.keys[j]].e->st.idem_key;
        snprintf(reason, sizeof(reason), "on_failed: retry, FAILED more than %s ago",
                 config_format_duration(t->on_failed_after_ms, d, sizeof(d)));
        enum store_rc rc = store_retry_failed(x->pt->store, x->pt->cfg->namespace, keys, x->b.nkeys,
                                              t->on_failed_after_ms, reason, &x->retried, x->err, x->errsz);
        free(keys);
        return rc;
}

/* Whether a message may have been seen under another key: key.previous's,
 * or (keys.layout: partitioned, by the message's timestamp) the bucket
 * before's. */
static int has_previous(const struct pl_topic *pt)
{
        return pt->t->prev_keyspec || (pt->cfg->keys_layout == LAYOUT_PARTITIONED && !pt->t->bucket_keytmpl);
}

/* How long a claimed key is kept: its class's keep; under keys.layout:
 * partitioned none of its own (its partition goes whole: core/buckets.h). */
static int64_t key_keep_ms(const struct pl_topic *pt)
{
        if (pt->cfg->keys_layout == LAYOUT_PARTITIONED || !pt->t->retention)
                return 0;
        return pt->t->retention->keep_ms;
}

/* A key key.previous built, and the item whose message it was built from. */
struct prev_ref {
        const char *key;
        size_t item;
};

static int by_prev_key(const void *a, const void *b)
{
        return strcmp(((const struct prev_ref *)a)->key, ((const struct prev_ref *)b)->key);
}

struct prev_probe {
        struct txn *x;
        struct prev_ref *refs;
        size_t n;
};

/* An old key found: every item it was built from is its duplicate. */
static void previous_outcome(void *opaque, const char *key, enum key_status status, const char *response,
                             const char *fingerprint)
{
        struct prev_probe *p = opaque;
        const struct topic_conf *t = p->x->pt->t;
        struct prev_ref probe = {key, 0};
        const struct prev_ref *hit = bsearch(&probe, p->refs, p->n, sizeof(*p->refs), by_prev_key);
        for (size_t i = hit ? (size_t)(hit - p->refs) : p->n; i > 0 && !strcmp(p->refs[i - 1].key, key); i--)
                hit = &p->refs[i - 1];
        for (size_t i = hit ? (size_t)(hit - p->refs) : p->n; i < p->n && !strcmp(p->refs[i].key, key); i++) {
                struct batch_item *it = &p->x->b.items[p->refs[i].item];
                batch_known_as(&p->x->b, p->refs[i].item, status, response, fingerprint);
                if (t->prev_keyspec)
                        log_info(p->x->pt->ctx,
                                 "key %s (version %d) was seen before as %s (version %d): absorbed, first outcome %s",
                                 it->e->st.idem_key, t->key_version, key, t->key_version - 1, key_status_name(status));
                else
                        log_info(p->x->pt->ctx,
                                 "key %s was seen before as %s, in the bucket before: absorbed, first outcome %s",
                                 it->e->st.idem_key, key, key_status_name(status));
        }
}

/* key.previous, while its window lasts: a message whose previous-version
 * key is stored was seen before — a duplicate with that key's outcome, not
 * claimed under its new key. One statement; none without key.previous. */
static enum store_rc known_as_previous(struct txn *x)
{
        struct prev_probe p = {x, NULL, 0};
        if (!has_previous(x->pt) || !x->b.nkeys)
                return STORE_OK;
        p.refs = xcalloc(x->b.nkeys, sizeof(*p.refs));
        for (size_t k = 0; k < x->b.nkeys; k++) {
                const char *prev = x->b.items[x->b.keys[k]].e->st.prev_key;
                if (prev && strcmp(prev, x->b.items[x->b.keys[k]].e->st.idem_key))
                        p.refs[p.n++] = (struct prev_ref){prev, x->b.keys[k]};
        }
        qsort(p.refs, p.n, sizeof(*p.refs), by_prev_key);
        const char **keys = xcalloc(p.n ? p.n : 1, sizeof(*keys));
        for (size_t i = 0; i < p.n; i++)
                keys[i] = p.refs[i].key;
        enum store_rc rc = p.n ? store_outcomes(x->pt->store, x->pt->cfg->namespace, p.n, keys, previous_outcome, &p,
                                                x->err, x->errsz)
                               : STORE_OK;
        if (!rc)
                batch_drop_known(&x->b);
        free(keys);
        free(p.refs);
        return rc;
}

/* 4. BEGIN, watched, and every distinct key looked up in one statement,
 *    which also reads what the batch needs of the keys seen before: the
 *    first outcome where a reply needs it, else only where the fingerprint
 *    differs. Optimistic (a probe: nothing inserted yet), or after a
 *    conflict pessimistic (every fresh key inserted at once). */
static enum pl_rc claim(struct txn *x)
{
        struct pl_topic *pt = x->pt;
        const struct topic_conf *t = pt->t;
        size_t k;
        char what[200];
        enum store_rc rc;
        const struct store_claim_outcomes outcomes = {keep_outcome, x};

        snprintf(what, sizeof(what), "batch of %zu from %s", x->b.n, t->name);
        watchdog_arm(pt->watchdog, pt->store, t->batch_timeout_ms, what);
        if ((rc = store_begin_batch(pt->store, x->err, x->errsz)) || (rc = retry_failed(x)) ||
            (rc = known_as_previous(x)))
                return failed(x, rc);
        k = x->b.nkeys;
        int *want = wanted_outcomes(x);
        x->claims = xcalloc(k ? k : 1, sizeof(*x->claims));
        for (size_t j = 0; j < k; j++) {
                const struct pl_msg *m = x->b.items[x->b.keys[j]].e->msg;
                const struct pl_state *st = &x->b.items[x->b.keys[j]].e->st;
                const struct retention_class *own = tenant_retention(pt->cfg, t, st->tenant);
                x->claims[j] = (struct store_claim_row){.key = st->idem_key,
                                                        .keep_ms = own ? own->keep_ms : 0,
                                                        .response_ttl_ms = own ? own->response_ttl_ms : 0,
                                                        .key_text = st->key_text,
                                                        .topic = m->topic,
                                                        .fingerprint = st->fingerprint,
                                                        .partition = m->partition,
                                                        .offset = m->offset,
                                                        .want_outcome = want[x->b.keys[j]]};
        }
        free(want);
        if (x->pessimistic)
                rc = store_claim(pt->store, pt->cfg->namespace, x->claims, k, key_keep_ms(pt),
                                 t->retention ? t->retention->response_ttl_ms : 0, &outcomes, x->err, x->errsz);
        else
                rc = store_probe_keys(pt->store, pt->cfg->namespace, x->claims, k, &outcomes, x->err, x->errsz);
        if (rc)
                return failed(x, rc);
        fault_point("after_claim");
        int *fresh = xcalloc(k ? k : 1, sizeof(*fresh));
        for (size_t j = 0; j < k; j++) {
                struct batch_item *it = &x->b.items[x->b.keys[j]];
                fresh[j] = x->claims[j].fresh;
                it->row = x->claims[j].row;
                if (x->claims[j].matched) /* stored with this very fingerprint */
                        it->stored.fingerprint = xstrdup(it->e->st.fingerprint);
        }
        batch_claimed(&x->b, fresh);
        free(fresh);
        report_conflict(x, 1);
        return PL_OK;
}

/* 5. Same key, another payload: counted, and absorbed or dead-lettered. The
 *    dead letters are written inside the transaction: if the broker does not
 *    acknowledge them, the batch rolls back and nothing is acknowledged. */
static enum pl_rc handle_mismatches(struct txn *x)
{
        struct pl_entry **letters = xcalloc(x->b.n ? x->b.n : 1, sizeof(*letters));
        enum pl_rc rc = PL_OK;
        size_t n = 0;
        for (size_t i = 0; i < x->b.n; i++) {
                struct batch_item *it = &x->b.items[i];
                if (it->state != ITEM_REPEAT && it->state != ITEM_KNOWN)
                        continue;
                const char *first = batch_first_fingerprint(&x->b, it);
                enum mismatch_verdict v = step_mismatch(x->pt, it->e, first);
                enum store_rc src;
                it->mismatch = v != MISMATCH_NONE;
                if (it->mismatch && (src = step_note_mismatch(x->pt, it->e, first, v, x->err, x->errsz))) {
                        free(letters);
                        return failed(x, src);
                }
                if (v == MISMATCH_LETTER) {
                        it->state = ITEM_DEAD_LETTER;
                        letters[n++] = it->e;
                }
        }
        if (n && step_dead_letter(x->pt, letters, n, x->err, x->errsz)) {
                store_rollback(x->pt->store);
                for (size_t i = 0; i < n; i++) {
                        free(letters[i]->st.dlq_reason);
                        letters[i]->st.dlq_reason = NULL;
                        letters[i]->st.stored_fingerprint[0] = '\0';
                }
                rc = PL_DLQ_FAILED;
        }
        free(letters);
        return rc;
}

/* 5b. Tenants at their quota: their new keys go to the dead-letter topic. */
static enum pl_rc enforce_quotas(struct txn *x)
{
        return tenants_enforce(x->pt, &x->b, x->pessimistic, x->err, x->errsz);
}

/* 6. The handler, for the fresh messages in partition-offset order. */
static enum pl_rc run_handler(struct txn *x) { return invoke_handler(x->pt, &x->b, x->err, x->errsz); }

/* 7. The outcomes. Optimistic: each fresh key inserted now, once, with its
 *    final status and first response, in key order; a key another
 *    transaction committed since the probe fails the INSERT: the batch is
 *    rolled back, to be run again pessimistically. Pessimistic: the claimed
 *    rows say DONE already (in this mode nobody sees a PENDING row: the claim
 *    and the effect are one transaction); only a rejection or a response is
 *    written, by row. */
static enum pl_rc insert_keys(struct txn *x)
{
        const struct topic_conf *t = x->pt->t;
        struct store_key_row *rows = xcalloc(x->b.nfresh ? x->b.nfresh : 1, sizeof(*rows));
        size_t n = 0;
        enum store_rc rc;
        for (size_t j = 0; j < x->b.nkeys; j++) { /* key order */
                const struct batch_item *it = &x->b.items[x->b.keys[j]];
                const struct pl_msg *m = it->e->msg;
                const struct pl_state *st = &it->e->st;
                if (it->state != ITEM_APPLIED && it->state != ITEM_REJECTED)
                        continue;
                const struct retention_class *own = tenant_retention(x->pt->cfg, t, st->tenant);
                rows[n++] = (struct store_key_row){.key = st->idem_key,
                                                   .keep_ms = own ? own->keep_ms : 0,
                                                   .response_ttl_ms = own ? own->response_ttl_ms : 0,
                                                   .key_text = st->key_text,
                                                   .topic = m->topic,
                                                   .fingerprint = st->fingerprint,
                                                   .partition = m->partition,
                                                   .offset = m->offset,
                                                   .status = batch_status(it),
                                                   .response = batch_response(it)};
        }
        rc = store_insert_keys(x->pt->store, x->pt->cfg->namespace, rows, n, key_keep_ms(x->pt),
                               t->retention ? t->retention->response_ttl_ms : 0, x->err, x->errsz);
        free(rows);
        if (rc == STORE_CONFLICT) {
                x->conflict = 1;
                x->nprobed = 0;
                x->probed = xcalloc(x->b.nkeys ? x->b.nkeys : 1, sizeof(*x->probed));
                for (size_t j = 0; j < x->b.nkeys; j++)
                        if (!x->b.items[x->b.keys[j]].known)
                                x->probed[x->nprobed++] = x->b.items[x->b.keys[j]].e->st.idem_key;
                metrics_claim_conflict(t->name);
                log_debug(x->pt->ctx, "batch of %zu: %s", x->b.n, x->err);
        }
        return rc ? failed(x, rc) : PL_OK;
}

static enum pl_rc record_outcomes(struct txn *x)
{
        size_t n = x->b.nfresh, k = 0;
        enum store_rc rc;
        if (!x->pessimistic)
                return insert_keys(x);
        struct store_outcome_row *rows = xcalloc(n ? n : 1, sizeof(*rows));
        for (size_t j = 0; j < n; j++) {
                const struct batch_item *it = &x->b.items[x->b.fresh[j]];
                if (it->state == ITEM_APPLIED && !it->ctx.response)
                        continue;
                rows[k++] =
                        (struct store_outcome_row){it->e->st.idem_key, it->row, batch_status(it), batch_response(it)};
        }
        rc = store_record(x->pt->store, x->pt->cfg->namespace, rows, k, x->err, x->errsz);
        free(rows);
        return rc ? failed(x, rc) : PL_OK;
}

/* 7b. The tenants' new live keys, counted with them. */
static enum pl_rc count_tenant_keys(struct txn *x)
{
        enum store_rc rc = tenants_add_live(x->pt, &x->b, x->err, x->errsz);
        return rc ? failed(x, rc) : PL_OK;
}

/* 8. Replies: the first outcome, to whoever asked and named a reply topic. */
static enum pl_rc send_replies(struct txn *x)
{
        const struct topic_conf *t = x->pt->t;
        enum store_rc rc;
        for (size_t i = 0; i < x->b.n; i++) {
                struct batch_item *it = &x->b.items[i];
                int duplicate = it->state == ITEM_REPEAT || it->state == ITEM_KNOWN, written;
                enum key_status status;
                const char *response;
                if ((!duplicate && it->state != ITEM_APPLIED && it->state != ITEM_REJECTED) ||
                    !reply_wanted(t, it->e->msg))
                        continue;
                if (duplicate)
                        batch_first_outcome(&x->b, it, &status, &response);
                else
                        status = batch_status(it), response = batch_response(it);
                if ((rc = reply_write(x->pt, it->e->msg, it->e->st.idem_key, status, response, duplicate, &written,
                                      &it->reply_refused, x->err, x->errsz)))
                        return failed(x, rc);
                *x->pt->outbox_pending += (size_t)written;
        }
        for (size_t j = 0; j < x->b.nfresh; j++)
                *x->pt->outbox_pending += (size_t)x->b.items[x->b.fresh[j]].ctx.emitted;
        return PL_OK;
}

/* 9, for a parallel worker's sub-batch: its counters, and its own position
 *  in every partition of the whole batch (none of its messages is below
 *  that batch's end undone); the partition's position moves only once
 *  every worker committed (core/parallel.c). */
static enum pl_rc record_worker_progress(struct txn *x)
{
        const struct par_sub *par = x->pt->par;
        int32_t parts[par->nspan ? par->nspan : 1];
        int64_t next[par->nspan ? par->nspan : 1];
        enum store_rc rc;
        for (size_t i = 0; i < x->b.nprog; i++) {
                struct store_progress *p = &x->b.prog[i];
                for (size_t k = 0; k < par->nspan; k++)
                        if (par->span[k].partition == p->partition)
                                p->from_offset = p->next_offset = par->span[k].from_offset;
                p->own_next = -1;
        }
        for (size_t k = 0; k < par->nspan; k++) {
                parts[k] = par->span[k].partition;
                next[k] = par->span[k].next_offset;
        }
        struct store_behind behind;
        if ((rc = store_progress(x->pt->store, x->pt->cfg->namespace, x->b.nprog, x->b.prog, &behind, x->err,
                                 x->errsz)) ||
            (rc = store_parallel_mark(x->pt->store, x->pt->cfg->namespace, x->pt->t->name, par->layout, par->worker,
                                      par->nspan, parts, next, x->err, x->errsz)))
                return failed(x, rc);
        return PL_OK;
}

/* 9. Per-partition progress, in the same transaction. */
static enum pl_rc record_progress(struct txn *x)
{
        enum store_rc rc = STORE_OK;
        batch_count(&x->b);
        if (x->pt->par)
                return record_worker_progress(x);
        enum pl_rc prc = step_progress(x->pt, x->b.prog, x->b.nprog, &rc, x->err, x->errsz);
        if (rc)
                return failed(x, rc);
        if (prc == PL_REPOSITION)
                store_rollback(x->pt->store);
        return prc;
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

/* What the batch refused (replies, the handler's host calls), counted only
 * now it has committed: a batch rolled back and retried, or split, refuses
 * the same values again, and the metrics are the database's truth. */
static void count_refusals(const struct txn *x)
{
        for (size_t i = 0; i < x->b.n; i++)
                if (x->b.items[i].reply_refused)
                        metrics_reply_refused(x->pt->t->name, x->b.items[i].reply_refused);
        for (size_t j = 0; j < x->b.nfresh; j++)
                host_count_refusals(&x->b.items[x->b.fresh[j]].ctx);
}

/* 11. Committed: where each partition may be acknowledged, and the report. */
static size_t committed(struct txn *x, struct pl_commit *commits)
{
        struct pl_topic *pt = x->pt;
        size_t nc = 0;
        if (pt->par) /* its partitions are acknowledged once every worker committed */
                step_counted(pt, x->b.prog, x->b.nprog);
        else
                nc = step_committed(pt, x->b.prog, x->b.nprog, commits);
        count_refusals(x);
        provenance_collect(pt, &x->b);
        tenants_count(pt, &x->b);
        if (x->retried) {
                metrics_failed_retried(pt->t->name, x->retried);
                log_info(pt->ctx, "%zu FAILED key%s ran again (on_failed: retry)", x->retried,
                         x->retried == 1 ? "" : "s");
        }
        pt->stats->batches++;
        pt->stats->consumed += x->b.n;
        for (size_t j = 0; j < x->b.nfresh; j++) {
                const struct batch_item *it = &x->b.items[x->b.fresh[j]];
                if (it->state == ITEM_REJECTED)
                        log_info(pt->ctx, "key %s rejected: %s", it->e->st.idem_key, batch_response(it));
        }
        log_debug(pt->ctx, "batch of %zu: %zu applied or rejected, %zu keys seen before", x->b.n, x->b.nfresh,
                  x->b.nkeys - x->b.nfresh);
        return nc;
}

/* 3. The batch's distinct keys, in claim order; a message here twice under
 *    two keys (the bucket before's, key.previous's) is one key. */
static enum pl_rc dedupe(struct txn *x)
{
        size_t adopted = has_previous(x->pt) ? batch_adopt_previous(&x->b) : 0;
        if (adopted)
                log_info(x->pt->ctx,
                         "%zu message(s) of this batch repeat another of it under its previous key "
                         "(the bucket before, or key.previous): one key each",
                         adopted);
        batch_dedupe(&x->b);
        return PL_OK;
}

/* The batch, step by step (each step's time is on the timeline). */
static const struct txn_step {
        const char *name;
        enum pl_rc (*run)(struct txn *x);
} txn_steps[] = {
        {"derive", derive_keys},   {"dead_letter", dead_letter_unkeyable}, {"dedupe", dedupe},
        {"claim", claim},          {"mismatch", handle_mismatches},        {"quota", enforce_quotas},
        {"handler", run_handler},  {"outcomes", record_outcomes},          {"tenant_usage", count_tenant_keys},
        {"replies", send_replies}, {"progress", record_progress},          {"commit", commit},
};

/* The batch once, step by step. */
static enum pl_rc txn_attempt(struct txn *x, struct pl_entry *const *ents, size_t n, struct pl_commit *commits,
                              size_t *ncommits)
{
        enum pl_rc rc = PL_OK;
        batch_init(&x->b, x->pt->t, ents, n);
        for (size_t s = 0; s < sizeof(txn_steps) / sizeof(txn_steps[0]); s++) {
                rc = txn_steps[s].run(x);
                timeline_mark(txn_steps[s].name);
                if (rc != PL_OK)
                        return rc;
        }
        *ncommits = committed(x, commits);
        timeline_mark("books");
        return PL_OK;
}

/* The attempt's items and claims let go of, for another attempt or for good. */
static void txn_clear(struct txn *x)
{
        batch_free(&x->b);
        free(x->claims);
        x->claims = NULL;
}

/* How long a topic claims pessimistically after its optimistic claim met
 * another transaction on the same keys: contention (competing consumers, a
 * zombie, a rebalance) tends to last, and an optimistic batch, which takes
 * its handler's locks before its keys', can deadlock with a pessimistic one,
 * which takes them the other way round. */
#define PESSIMISTIC_MS 60000

/* An optimistic attempt that failed in a way contention on its keys can
 * cause: a conflict; a deadlock or serialization failure of dedupd's
 * statements; a handler that left the transaction aborted (its deadlock
 * looks the same). Run again pessimistically, it fails again only for a
 * reason of its own (then split, retried, ... as any batch). */
static int contended(const struct txn *x, enum pl_rc rc)
{
        if (x->pessimistic)
                return 0;
        return x->conflict || rc == PL_SPLIT || (rc == PL_RETRY && store_last_contended(x->pt->store));
}

/* Whether the topic claims pessimistically now. The deadline is the
 * topic's, not the lane's: an optimistic batch and a pessimistic one over
 * the same keys can deadlock, so once one lane has met contention every
 * lane claims pessimistically (pessimistic claimers never deadlock with
 * each other), and they go back together. */
static int pessimistic_now(const struct pl_topic *pt)
{
        return log_now_ms() < __atomic_load_n(pt->optimistic_after, __ATOMIC_RELAXED);
}

static enum pl_rc txn_process(struct pl_topic *pt, struct pl_entry *const *ents, size_t n, struct pl_commit *commits,
                              size_t *ncommits, char *err, size_t errsz)
{
        struct txn x = {.pt = pt, .err = err, .errsz = errsz, .pessimistic = pessimistic_now(pt)};
        enum pl_rc rc;

        *ncommits = 0;
        rc = txn_attempt(&x, ents, n, commits, ncommits);
        if (contended(&x, rc)) {
                if (!x.conflict)
                        log_info(pt->ctx,
                                 "batch of %zu failed (%s): run again at once with a pessimistic claim, in case "
                                 "another transaction on its keys caused it",
                                 n, err);
                __atomic_store_n(pt->optimistic_after, log_now_ms() + PESSIMISTIC_MS, __ATOMIC_RELAXED);
                /* Rolled back: at once again, claiming first. Not the messages'
                 * attempt (nothing of theirs failed), no backoff, no split. */
                txn_clear(&x);
                x.pessimistic = 1;
                err[0] = '\0';
                rc = txn_attempt(&x, ents, n, commits, ncommits);
                report_conflict(&x, 0); /* when the retry failed before its claim */
        }
        watchdog_disarm(pt->watchdog);
        if (rc != PL_OK)
                pt->stats->retries++;
        else
                pt->contention_streak = 0;
        txn_clear(&x);
        free(x.probed);
        return rc;
}

const struct mode mode_transactional = {"transactional", txn_process};
