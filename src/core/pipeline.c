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
#include "core/split.h"
#include "ops/metrics.h"

struct pipeline {
        const struct config *cfg;
        struct store *store;
        struct sink sink;
        struct handler *handlers;   /* one per topic */
        struct pl_topic *topics;    /* one per topic: what its mode works with */
        const struct mode **modes;  /* one per topic */
        struct split *splits;       /* one per topic */
        struct pl_stats stats;
        struct part_states parts;
        size_t outbox_pending;      /* rows written to the outbox since the relay last ran */
};

struct pipeline *pipeline_new(const struct config *cfg, struct store *store, struct sink sink, char *err,
                              size_t errsz)
{
        struct pipeline *pl = xcalloc(1, sizeof(*pl));
        size_t n = cfg->topic_cnt ? cfg->topic_cnt : 1;
        pl->handlers = xcalloc(n, sizeof(*pl->handlers));
        pl->topics = xcalloc(n, sizeof(*pl->topics));
        pl->modes = xcalloc(n, sizeof(*pl->modes));
        pl->splits = xcalloc(n, sizeof(*pl->splits));
        pl->cfg = cfg;
        pl->store = store;
        pl->sink = sink;
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                const struct topic_conf *t = &cfg->topics[i];
                struct pl_topic *pt = &pl->topics[i];
                if (loader_open(&pl->handlers[i], t->handler_path, err, errsz) ||
                    loader_init(&pl->handlers[i], t->handler_config, store_conn(store), err, errsz))
                        goto error;
                *pt = (struct pl_topic){.cfg = cfg, .t = t, .topic_idx = i, .store = store, .sink = &pl->sink,
                                        .handler = &pl->handlers[i], .stats = &pl->stats, .parts = &pl->parts,
                                        .outbox_pending = &pl->outbox_pending};
                snprintf(pt->ctx, sizeof(pt->ctx), "topic:%s", t->name);
                metrics_topic(t->name);
                pl->modes[i] = t->mode == MODE_EXTERNAL ? &mode_external : &mode_transactional;
                log_info("pipeline", "topic %s: handler %s loaded from %s (%s mode)", t->name,
                         pl->handlers[i].desc->name ? pl->handlers[i].desc->name : "?", t->handler_path,
                         pl->modes[i]->name);
        }
        return pl;
error:
        pipeline_free(pl);
        return NULL;
}

void pipeline_free(struct pipeline *pl)
{
        if (!pl)
                return;
        for (size_t i = 0; i < pl->cfg->topic_cnt; i++)
                loader_close(&pl->handlers[i]);
        free(pl->handlers);
        free(pl->topics);
        free(pl->modes);
        free(pl->splits);
        part_states_free(&pl->parts);
        free(pl);
}

void pipeline_set_watchdog(struct pipeline *pl, struct watchdog *w)
{
        for (size_t i = 0; i < pl->cfg->topic_cnt; i++)
                pl->topics[i].watchdog = w;
}

static double seconds_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

enum pl_rc pipeline_process(struct pipeline *pl, size_t topic_idx, struct pl_msg *const *msgs, size_t n,
                            size_t *taken, struct pl_commit *commits, size_t *ncommits, char *err, size_t errsz)
{
        struct pl_topic *pt = &pl->topics[topic_idx];
        *taken = guard_batch_start(pt, msgs, split_take(&pl->splits[topic_idx], n));
        fault_point("after_poll");
        timeline_mark("guard");
        double t0 = seconds_now();
        enum pl_rc rc = pl->modes[topic_idx]->process(pt, msgs, *taken, commits, ncommits, err, errsz);
        rc = split_after(&pl->splits[topic_idx], pt, msgs, *taken, rc, err);
        if (rc == PL_OK)
                metrics_batch(pt->t->name, *taken, seconds_now() - t0);
        else
                metrics_batch_retry(pt->t->name);
        return rc;
}

const struct pl_stats *pipeline_stats(const struct pipeline *pl) { return &pl->stats; }

size_t pipeline_take_outbox(struct pipeline *pl)
{
        size_t n = pl->outbox_pending;
        pl->outbox_pending = 0;
        return n;
}

void pipeline_forget(struct pipeline *pl, size_t topic_idx, int32_t partition)
{
        struct part_state *ps = part_state(&pl->parts, topic_idx, partition);
        guard_release(&pl->topics[topic_idx], ps);
        ps->verified_next = -1;
        ps->own_next = -1;
        split_reset(&pl->splits[topic_idx]);
}

void pipeline_stop(struct pipeline *pl)
{
        for (size_t i = 0; i < pl->parts.cnt; i++)
                guard_release(&pl->topics[pl->parts.v[i].topic_idx], &pl->parts.v[i]);
}
