/* pipeline: the protocol's front — each topic's handler and mode, the crash-loop guard before a batch, the books after. */
#include "core/pipeline.h"

#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fault.h"
#include "base/log.h"
#include "base/timeline.h"
#include "core/guard.h"
#include "core/parallel.h"
#include "core/split.h"
#include "ops/metrics.h"

/* One lane: a connection and what the modes keep per partition and topic.
 * Its batches run one at a time; two lanes' may run at once, on two threads
 * (the handlers, loaded once, are shared). */
struct lane {
        struct store *store;
        struct pl_topic *topics; /* one per topic: what its mode works with */
        struct split *splits;    /* one per topic */
        struct pl_stats stats;   /* written by the lane's batches */
        struct pl_stats settled; /* what pipeline_stats reads (pipeline_settle) */
        struct part_states parts;
        size_t outbox_pending;      /* rows written to the outbox since the lane was last settled */
        struct par_helper *helpers; /* parallel topics: the connections of workers 2.. */
        size_t nhelpers;
};

#define MAX_LANES 64

struct pipeline {
        const struct config *cfg;
        struct sink sink;
        struct handler *handlers;  /* one per topic */
        const struct mode **modes; /* one per topic */
        int64_t *optimistic_after; /* one per topic, shared by the lanes (txn.c) */
        struct lane lanes[MAX_LANES];
        size_t nlanes;
        struct pl_stats stats; /* the sum of the lanes' settled stats */
        size_t outbox_settled; /* outbox rows of settled batches since the relay last ran */
};

struct pipeline *pipeline_new(const struct config *cfg, struct store *setup, struct sink sink, char *err, size_t errsz)
{
        struct pipeline *pl = xcalloc(1, sizeof(*pl));
        size_t n = cfg->topic_cnt ? cfg->topic_cnt : 1;
        pl->handlers = xcalloc(n, sizeof(*pl->handlers));
        pl->modes = xcalloc(n, sizeof(*pl->modes));
        pl->optimistic_after = xcalloc(n, sizeof(*pl->optimistic_after));
        pl->cfg = cfg;
        pl->sink = sink;
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                const struct topic_conf *t = &cfg->topics[i];
                if (loader_open(&pl->handlers[i], t->handler_path, err, errsz) ||
                    loader_init(&pl->handlers[i], t->handler_config, setup, cfg->namespace, t->name, err, errsz))
                        goto error;
                metrics_topic(t->name);
                pl->modes[i] = t->mode == MODE_EXTERNAL ? &mode_external : &mode_transactional;
                const char *version = loader_version(&pl->handlers[i]);
                log_info("pipeline", "topic %s: handler %s%s%s loaded from %s (%s mode)", t->name,
                         pl->handlers[i].desc->name ? pl->handlers[i].desc->name : "?", version ? " " : "",
                         version ? version : "", t->handler_path, pl->modes[i]->name);
        }
        return pl;
error:
        pipeline_free(pl);
        return NULL;
}

size_t pipeline_add_lane(struct pipeline *pl, struct store *store, struct watchdog *w)
{
        size_t n = pl->cfg->topic_cnt ? pl->cfg->topic_cnt : 1;
        if (pl->nlanes == MAX_LANES)
                abort(); /* config_check keeps workers within MAX_LANES */
        struct lane *l = &pl->lanes[pl->nlanes];
        l->store = store;
        l->topics = xcalloc(n, sizeof(*l->topics));
        l->splits = xcalloc(n, sizeof(*l->splits));
        for (size_t i = 0; i < pl->cfg->topic_cnt; i++) {
                struct pl_topic *pt = &l->topics[i];
                *pt = (struct pl_topic){.cfg = pl->cfg,
                                        .t = &pl->cfg->topics[i],
                                        .topic_idx = i,
                                        .store = store,
                                        .sink = &pl->sink,
                                        .handler = &pl->handlers[i],
                                        .optimistic_after = &pl->optimistic_after[i],
                                        .watchdog = w,
                                        .stats = &l->stats,
                                        .parts = &l->parts,
                                        .outbox_pending = &l->outbox_pending};
                snprintf(pt->ctx, sizeof(pt->ctx), "topic:%s", pl->cfg->topics[i].name);
        }
        return pl->nlanes++;
}

struct handler *pipeline_handler(struct pipeline *pl, size_t topic_idx) { return &pl->handlers[topic_idx]; }

void pipeline_add_helpers(struct pipeline *pl, size_t lane, struct par_helper *helpers, size_t n)
{
        pl->lanes[lane].helpers = helpers;
        pl->lanes[lane].nhelpers = n;
}

size_t pipeline_parallel_helpers(const struct config *cfg)
{
        int most = 1;
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                if (cfg->topics[i].parallel_workers > most)
                        most = cfg->topics[i].parallel_workers;
        return (size_t)most - 1;
}

size_t pipeline_lanes(const struct pipeline *pl) { return pl->nlanes; }

struct store *pipeline_lane_store(const struct pipeline *pl, size_t lane) { return pl->lanes[lane].store; }

int pipeline_concurrent(const struct pipeline *pl, int parallel_only, char *err, size_t errsz)
{
        for (size_t i = 0; i < pl->cfg->topic_cnt; i++) {
                const struct topic_conf *t = &pl->cfg->topics[i];
                if (parallel_only && t->parallel_workers < 2)
                        continue;
                const struct dedupd_handler *h = pl->handlers[i].desc;
                if (t->mode == MODE_EXTERNAL) {
                        snprintf(err, errsz, "topic %s: external mode runs on one connection: workers must be 1",
                                 t->name);
                        return -1;
                }
                if (!(h->flags & DEDUPD_HANDLER_F_CONCURRENT)) {
                        snprintf(
                                err, errsz,
                                "topic %s: handler %s does not declare DEDUPD_HANDLER_F_CONCURRENT (that its calls may "
                                "run on several connections at once): workers must be 1",
                                t->name, t->handler_path);
                        return -1;
                }
        }
        return 0;
}

void pipeline_free(struct pipeline *pl)
{
        if (!pl)
                return;
        for (size_t i = 0; i < pl->cfg->topic_cnt; i++)
                loader_close(&pl->handlers[i]);
        for (size_t l = 0; l < pl->nlanes; l++) {
                free(pl->lanes[l].topics);
                free(pl->lanes[l].splits);
                part_states_free(&pl->lanes[l].parts);
        }
        free(pl->handlers);
        free(pl->modes);
        free(pl->optimistic_after);
        free(pl);
}

static double seconds_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

enum pl_rc pipeline_process(struct pipeline *pl, size_t lane, size_t topic_idx, struct pl_entry *const *ents, size_t n,
                            size_t *taken, struct pl_commit *commits, size_t *ncommits, char *err, size_t errsz)
{
        struct lane *l = &pl->lanes[lane];
        struct pl_topic *pt = &l->topics[topic_idx];
        *taken = guard_batch_start(pt, ents, split_take(&l->splits[topic_idx], n));
        fault_point("after_poll");
        timeline_mark("guard");
        double t0 = seconds_now();
        enum pl_rc rc = pt->t->parallel_workers > 1
                                ? parallel_process(pt, pl->modes[topic_idx], l->helpers, l->nhelpers, ents, *taken,
                                                   commits, ncommits, err, errsz)
                                : pl->modes[topic_idx]->process(pt, ents, *taken, commits, ncommits, err, errsz);
        rc = split_after(&l->splits[topic_idx], pt, ents, *taken, rc, err);
        if (rc == PL_OK)
                metrics_batch(pt->t->name, *taken, seconds_now() - t0);
        else
                metrics_batch_retry(pt->t->name);
        return rc;
}

static void stats_add(struct pl_stats *to, const struct pl_stats *a, const struct pl_stats *b)
{
        to->batches += a->batches - b->batches;
        to->consumed += a->consumed - b->consumed;
        to->applied += a->applied - b->applied;
        to->rejected += a->rejected - b->rejected;
        to->duplicates += a->duplicates - b->duplicates;
        to->dead_lettered += a->dead_lettered - b->dead_lettered;
        to->retries += a->retries - b->retries;
        to->mismatches += a->mismatches - b->mismatches;
}

void pipeline_settle(struct pipeline *pl, size_t lane)
{
        struct lane *l = &pl->lanes[lane];
        stats_add(&pl->stats, &l->stats, &l->settled);
        l->settled = l->stats;
        pl->outbox_settled += l->outbox_pending;
        l->outbox_pending = 0;
}

const struct pl_stats *pipeline_stats(const struct pipeline *pl) { return &pl->stats; }

size_t pipeline_take_outbox(struct pipeline *pl)
{
        size_t n = pl->outbox_settled;
        pl->outbox_settled = 0;
        return n;
}

void pipeline_forget(struct pipeline *pl, size_t topic_idx, int32_t partition)
{
        for (size_t i = 0; i < pl->nlanes; i++) {
                struct lane *l = &pl->lanes[i];
                struct part_state *ps = part_state(&l->parts, topic_idx, partition);
                guard_release(&l->topics[topic_idx], ps);
                ps->verified_next = -1;
                ps->own_next = -1;
                split_reset(&l->splits[topic_idx]);
        }
}

void pipeline_stop(struct pipeline *pl)
{
        for (size_t l = 0; l < pl->nlanes; l++)
                for (size_t i = 0; i < pl->lanes[l].parts.cnt; i++)
                        guard_release(&pl->lanes[l].topics[pl->lanes[l].parts.v[i].topic_idx],
                                      &pl->lanes[l].parts.v[i]);
}
