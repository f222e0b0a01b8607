/* state: the loopback broker itself — its partitions' logs, the rebalances a test asks for, and what the test reads back. */
#include "source/loopback/state.h"

#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

struct loopback *loopback_new(const struct config *cfg)
{
        struct loopback *lb = xcalloc(1, sizeof(*lb));
        lb->src.ops = &lb_source_ops;
        lb->cfg = cfg;
        lb->up = 1;
        lb->fate = SINK_ACKED;
        pthread_mutex_init(&lb->lock, NULL);
        return lb;
}

static void entry_free(struct lb_entry *e)
{
        for (size_t h = 0; h < e->header_cnt; h++) {
                free((char *)e->headers[h].name);
                free((char *)e->headers[h].value);
        }
        free(e->headers);
        free(e->key);
        free(e->value);
        free(e);
}

static void events_clear(struct loopback *lb)
{
        for (size_t i = 0; i < lb->event_cnt; i++)
                free(lb->events[i].parts);
        free(lb->events);
        lb->events = NULL;
        lb->event_cnt = 0;
}

void loopback_free(struct loopback *lb)
{
        if (!lb)
                return;
        for (size_t p = 0; p < lb->part_cnt; p++) {
                for (size_t i = 0; i < lb->parts[p].cnt; i++)
                        entry_free(lb->parts[p].log[i]);
                free(lb->parts[p].log);
        }
        free(lb->parts);
        events_clear(lb);
        lb_sink_free(lb);
        free(lb->failure);
        pthread_mutex_destroy(&lb->lock);
        free(lb);
}

struct source *loopback_source(struct loopback *lb, struct source_events ev)
{
        lb->ev = ev;
        lb->closed = 0;
        for (size_t p = 0; p < lb->part_cnt; p++) /* a consumer (re)joins: nothing is its own yet */
                if (lb->parts[p].st.assigned)
                        lb_part_unassign(&lb->parts[p]);
        return &lb->src;
}

struct source *loopback_source_new(const struct config *cfg, struct source_events ev)
{
        struct loopback *lb = loopback_new(cfg);
        lb->owned = 1;
        return loopback_source(lb, ev);
}

struct loopback *loopback_of(struct source *src) { return (struct loopback *)src; }

/* ---- partitions -------------------------------------------------------------- */

size_t lb_topic_idx(const struct loopback *lb, const char *topic)
{
        for (size_t t = 0; t < lb->cfg->topic_cnt; t++)
                if (!strcmp(lb->cfg->topics[t].name, topic))
                        return t;
        log_error("loopback", "topic %s is not in the configuration", topic);
        abort();
}

struct lb_part *lb_part_find(const struct loopback *lb, size_t topic_idx, int32_t partition)
{
        for (size_t p = 0; p < lb->part_cnt; p++)
                if (lb->parts[p].topic_idx == topic_idx && lb->parts[p].partition == partition)
                        return &lb->parts[p];
        return NULL;
}

struct lb_part *lb_part_get(struct loopback *lb, size_t topic_idx, int32_t partition)
{
        struct lb_part *p = lb_part_find(lb, topic_idx, partition);
        if (p)
                return p;
        if (lb->part_cnt == lb->part_cap) {
                lb->part_cap = lb->part_cap ? lb->part_cap * 2 : 8;
                lb->parts = xrealloc(lb->parts, lb->part_cap * sizeof(*lb->parts));
        }
        p = &lb->parts[lb->part_cnt++];
        *p = (struct lb_part){.topic_idx = topic_idx, .partition = partition};
        p->st.acked = p->st.sought = LOOPBACK_NONE;
        p->st.started = SOURCE_START_BROKER;
        return p;
}

/* ---- what the test does ---------------------------------------------------- */

static struct dedupd_header *headers_copy(const struct dedupd_header *h, size_t n)
{
        struct dedupd_header *c = n ? xcalloc(n, sizeof(*c)) : NULL;
        for (size_t i = 0; i < n; i++) {
                c[i].name = xstrdup(h[i].name);
                c[i].value = h[i].value ? memcpy(xmalloc(h[i].value_len + 1), h[i].value, h[i].value_len) : NULL;
                c[i].value_len = h[i].value_len;
        }
        return c;
}

int64_t loopback_push(struct loopback *lb, const char *topic, int32_t partition, const char *key, const char *value,
                      const struct dedupd_header *headers, size_t header_cnt)
{
        struct lb_part *p = lb_part_get(lb, lb_topic_idx(lb, topic), partition);
        struct lb_entry *e = xcalloc(1, sizeof(*e));
        e->offset = p->end++;
        e->timestamp_ms = log_now_ms();
        e->key = key ? xstrdup(key) : NULL;
        e->value = xstrdup(value);
        e->headers = headers_copy(headers, header_cnt);
        e->header_cnt = header_cnt;
        if (p->cnt == p->cap) {
                p->cap = p->cap ? p->cap * 2 : 64;
                p->log = xrealloc(p->log, p->cap * sizeof(*p->log));
        }
        p->log[p->cnt++] = e;
        return e->offset;
}

void loopback_gap(struct loopback *lb, const char *topic, int32_t partition, int64_t n)
{
        lb_part_get(lb, lb_topic_idx(lb, topic), partition)->end += n;
}

static void event_add(struct loopback *lb, enum lb_event_kind kind, const char *topic, const int32_t *partitions,
                      size_t n)
{
        struct lb_event *ev;
        lb->events = xrealloc(lb->events, (lb->event_cnt + 1) * sizeof(*lb->events));
        ev = &lb->events[lb->event_cnt++];
        *ev = (struct lb_event){.kind = kind, .n = n};
        if (!topic)
                return;
        size_t t = lb_topic_idx(lb, topic);
        ev->parts = xcalloc(n ? n : 1, sizeof(*ev->parts));
        for (size_t i = 0; i < n; i++) {
                ev->parts[i] = (struct pl_part){t, partitions[i]};
                lb_part_get(lb, t, partitions[i]);
        }
}

void loopback_assign(struct loopback *lb, const char *topic, const int32_t *partitions, size_t n)
{
        event_add(lb, LB_ASSIGN, topic, partitions, n);
}

void loopback_revoke(struct loopback *lb, const char *topic, const int32_t *partitions, size_t n)
{
        event_add(lb, LB_REVOKE, topic, partitions, n);
}

void loopback_revoke_all(struct loopback *lb) { event_add(lb, LB_REVOKE, NULL, NULL, 0); }

void loopback_on_poll(struct loopback *lb, void (*fn)(struct loopback *lb, void *opaque), void *opaque)
{
        lb->on_poll = fn;
        lb->poll_opaque = opaque;
}

void loopback_set_failure(struct loopback *lb, const char *failure)
{
        free(lb->failure);
        lb->failure = failure ? xstrdup(failure) : NULL;
}

void loopback_set_connected(struct loopback *lb, int up, const char *why)
{
        lb->up = up;
        snprintf(lb->why, sizeof(lb->why), "%s", why ? why : "");
}

/* ---- what the test asserts on ------------------------------------------------ */

struct loopback_part_state loopback_part(const struct loopback *lb, const char *topic, int32_t partition)
{
        const struct lb_part *p = lb_part_find(lb, lb_topic_idx(lb, topic), partition);
        struct loopback_part_state none = {
                .acked = LOOPBACK_NONE, .sought = LOOPBACK_NONE, .started = SOURCE_START_BROKER};
        return p ? p->st : none;
}

int64_t loopback_acked(const struct loopback *lb, const char *topic, int32_t partition)
{
        return loopback_part(lb, topic, partition).acked;
}

unsigned loopback_polls(const struct loopback *lb) { return lb->polls; }

int loopback_closed(const struct loopback *lb) { return lb->closed; }
