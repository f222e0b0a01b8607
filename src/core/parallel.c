/* parallel: parallel keys inside a partition — a batch split by a key onto workers, each on its own connection and in its own transaction; the partition moves on once every worker committed. */
#include "core/parallel.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "base/keyspec.h"
#include "base/log.h"
#include "base/mem.h"
#include "core/steps.h"
#include "pg/offsets.h"

#define PAR_MAX 64 /* config: parallel.workers */

/* One worker's share of the batch, and what became of it. */
struct par_run {
        const struct mode *mode;
        struct pl_topic pt; /* the lane's, on the worker's connection, watchdog and counters */
        struct par_sub sub;
        struct pl_stats stats;
        struct part_states parts;
        size_t outbox;
        struct pl_entry **ents;
        size_t n;
        struct pl_commit *commits; /* unused: the batch is acknowledged as a whole */
        size_t nc;
        enum pl_rc rc;
        pthread_t thread;
        int threaded;
        char err[1024];
};

int parallel_worker_of(const char *key, int workers)
{
        uint64_t h = 14695981039346656037ULL;
        for (const unsigned char *p = (const unsigned char *)key; *p; p++)
                h = (h ^ *p) * 1099511628211ULL;
        return workers > 1 ? (int)(h % (uint64_t)workers) : 0;
}

/* The worker e goes to; a message without the key (or already bound for
 * the dead-letter topic) goes to the first, which dead-letters it. */
static int route(const struct pl_topic *pt, struct pl_entry *e)
{
        const struct pl_msg *m = e->msg;
        const struct keytmpl *kt = pt->t->parallel_keytmpl;
        char why[512];
        json_t *root = NULL;
        char *key = NULL;
        step_prepare(pt, e); /* the limits first: no JSON read past limits.json_depth */
        if (e->st.dlq_reason)
                return 0;
        struct record in = {.key = m->key,
                            .key_len = m->key_len,
                            .value = m->value,
                            .value_len = m->value_len,
                            .headers = m->headers,
                            .header_cnt = m->header_cnt,
                            .props = m->props,
                            .prop_cnt = m->prop_cnt};
        if (!keytmpl_needs_json(kt) || (root = keyspec_load_json(&in, why, sizeof(why))))
                key = keytmpl_render(kt, &in, root, why, sizeof(why));
        json_decref(root);
        if (!key || !*key) {
                free(e->st.dlq_reason);
                e->st.dlq_reason = xasprintf("parallel.key: %s", key ? "empty" : why);
                free(key);
                return 0;
        }
        int w = parallel_worker_of(key, pt->t->parallel_workers);
        free(key);
        return w;
}

/* The batch's partitions: from its first offset to the one after its last. */
static size_t span_of(struct pl_entry *const *ents, size_t n, struct store_progress *span)
{
        size_t ns = 0;
        for (size_t i = 0; i < n; i++) {
                const struct pl_msg *m = ents[i]->msg;
                size_t k = 0;
                while (k < ns && span[k].partition != m->partition)
                        k++;
                if (k == ns)
                        span[ns++] = (struct store_progress){.topic = m->topic,
                                                             .partition = m->partition,
                                                             .from_offset = m->offset,
                                                             .next_offset = m->offset + 1,
                                                             .own_next = -1};
                if (m->offset < span[k].from_offset)
                        span[k].from_offset = m->offset;
                if (m->offset + 1 > span[k].next_offset)
                        span[k].next_offset = m->offset + 1;
        }
        return ns;
}

static void run_one(struct par_run *r)
{
        struct store *s = r->pt.store;
        r->err[0] = '\0';
        if (!store_ok(s) && store_connect(s, r->err, sizeof(r->err)) != STORE_OK) {
                r->rc = PL_DB_DOWN;
                return;
        }
        r->rc = r->mode->process(&r->pt, r->ents, r->n, r->commits, &r->nc, r->err, sizeof(r->err));
        if (r->rc == PL_OK)
                fault_point("after_worker_commit"); /* this worker committed, the partition has not moved */
}

static void *run_thread(void *arg)
{
        run_one(arg);
        return NULL;
}

/* Which of two results the batch reports: what needs the most care first. */
static int severity(enum pl_rc rc)
{
        switch (rc) {
        case PL_DB_DOWN: return 5;
        case PL_REPOSITION: return 4;
        case PL_DLQ_FAILED: return 3;
        case PL_RETRY: return 2;
        case PL_SPLIT: return 1;
        case PL_OK: break;
        }
        return 0;
}

/* Worker w's share set up on the lane's pt: its connection, its counters. */
static void prepare(struct par_run *r, struct pl_topic *pt, const struct par_helper *helpers, int w,
                    const struct store_progress *span, size_t nspan)
{
        r->pt = *pt;
        r->pt.store = w ? helpers[w - 1].store : pt->store;
        r->pt.watchdog = w ? helpers[w - 1].wd : pt->watchdog;
        r->pt.stats = &r->stats;
        r->pt.parts = &r->parts;
        r->pt.outbox_pending = &r->outbox;
        r->sub = (struct par_sub){.worker = w, .layout = pt->t->parallel_layout, .span = span, .nspan = nspan};
        r->pt.par = &r->sub;
        snprintf(r->pt.ctx, sizeof(r->pt.ctx), "%s worker:%d", pt->ctx, w + 1);
        r->commits = xcalloc(r->n + 1, sizeof(*r->commits));
}

/* A worker's counters and outbox rows, onto the lane's. */
static void merge(struct pl_topic *pt, const struct par_run *r)
{
        pt->stats->consumed += r->stats.consumed;
        pt->stats->applied += r->stats.applied;
        pt->stats->rejected += r->stats.rejected;
        pt->stats->duplicates += r->stats.duplicates;
        pt->stats->dead_lettered += r->stats.dead_lettered;
        pt->stats->retries += r->stats.retries;
        pt->stats->mismatches += r->stats.mismatches;
        *pt->outbox_pending += r->outbox;
}

/* Every worker committed: the partitions' positions in dedupd.offsets, on the lane's connection. */
static enum pl_rc settle(struct pl_topic *pt, struct store_progress *span, size_t nspan, struct pl_commit *commits,
                         size_t *ncommits, char *err, size_t errsz)
{
        enum store_rc src = STORE_OK;
        fault_point("before_parallel_settle"); /* every worker committed, the partition has not moved */
        enum pl_rc rc = step_progress(pt, span, nspan, &src, err, errsz);
        if (src)
                return step_fail(pt->store, src);
        if (rc != PL_OK)
                return rc;
        pt->stats->batches++;
        *ncommits = step_committed(pt, span, nspan, commits);
        return PL_OK;
}

/* The workers' shares run, each on its thread (the first on this one). */
static void run_all(struct par_run *runs, int workers)
{
        for (int w = 1; w < workers; w++)
                if (runs[w].n)
                        runs[w].threaded = !pthread_create(&runs[w].thread, NULL, run_thread, &runs[w]);
        for (int w = 0; w < workers; w++)
                if (runs[w].n && !runs[w].threaded)
                        run_one(&runs[w]);
        for (int w = 1; w < workers; w++)
                if (runs[w].threaded)
                        pthread_join(runs[w].thread, NULL);
}

enum pl_rc parallel_process(struct pl_topic *pt, const struct mode *mode, const struct par_helper *helpers,
                            size_t nhelpers, struct pl_entry *const *ents, size_t n, struct pl_commit *commits,
                            size_t *ncommits, char *err, size_t errsz)
{
        int workers = pt->t->parallel_workers;
        struct par_run runs[PAR_MAX];
        struct store_progress *span = xcalloc(n ? n : 1, sizeof(*span));
        int *to = xcalloc(n ? n : 1, sizeof(*to));
        enum pl_rc rc = PL_OK;
        size_t nspan = span_of(ents, n, span);

        *ncommits = 0;
        if ((size_t)workers > nhelpers + 1)
                workers = (int)nhelpers + 1; /* the daemon gives each lane enough; a test may give fewer */
        memset(runs, 0, sizeof(runs[0]) * (size_t)workers);
        for (size_t i = 0; i < n; i++)
                runs[to[i] = route(pt, ents[i]) % workers].n++;
        for (int w = 0; w < workers; w++) {
                runs[w].mode = mode;
                runs[w].ents = xcalloc(runs[w].n ? runs[w].n : 1, sizeof(*runs[w].ents));
                runs[w].n = 0;
        }
        for (size_t i = 0; i < n; i++) /* offset order within each worker: the batch's */
                runs[to[i]].ents[runs[to[i]].n++] = ents[i];
        for (int w = 0; w < workers; w++)
                prepare(&runs[w], pt, helpers, w, span, nspan);
        run_all(runs, workers);
        pt->contention_streak = 0; /* the longest of the workers' (each began with the lane's) */
        for (int w = 0; w < workers; w++) {
                merge(pt, &runs[w]);
                if (runs[w].pt.contention_streak > pt->contention_streak)
                        pt->contention_streak = runs[w].pt.contention_streak;
                if (severity(runs[w].rc) > severity(rc)) {
                        rc = runs[w].rc;
                        snprintf(err, errsz, "worker %d: %s", w + 1, runs[w].err);
                }
        }
        if (rc == PL_OK)
                rc = settle(pt, span, nspan, commits, ncommits, err, errsz);
        for (int w = 0; w < workers; w++) {
                free(runs[w].ents);
                free(runs[w].commits);
                part_states_free(&runs[w].parts);
        }
        free(span);
        free(to);
        return rc;
}
