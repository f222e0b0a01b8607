/* consumer: the loopback broker's consumer side — struct source_ops over its logs, recording what the runner did. */
#include "source/loopback/state.h"

#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct loopback *of(struct source *src) { return (struct loopback *)src; }

/* ---- rebalances, served from inside poll --------------------------------------- */

/* Where a partition fetches from after the runner said start. */
static int64_t start_position(const struct lb_part *p, int64_t start)
{
        if (start >= 0)
                return start;
        return p->st.acked != LOOPBACK_NONE ? p->st.acked : 0; /* auto.offset.reset: earliest */
}

static void serve_assign(struct loopback *lb, const struct lb_event *ev)
{
        int64_t start[ev->n ? ev->n : 1];
        for (size_t i = 0; i < ev->n; i++)
                start[i] = SOURCE_START_BROKER;
        if (lb->ev.assigned)
                lb->ev.assigned(lb->ev.opaque, ev->parts, ev->n, start);
        for (size_t i = 0; i < ev->n; i++) {
                struct lb_part *p = lb_part_get(lb, ev->parts[i].topic_idx, ev->parts[i].partition);
                p->st.assigned = 1;
                p->st.paused = 0; /* a new assignment fetches until told otherwise */
                p->st.started = start[i];
                p->st.awaiting = start[i] == SOURCE_START_LATER;
                p->st.position = start_position(p, start[i]);
        }
        if (lb->ev.settled)
                lb->ev.settled(lb->ev.opaque);
}

/* Its next owner starts where the broker has it: the committed offset. */
void lb_part_unassign(struct lb_part *p)
{
        p->st.assigned = 0;
        p->st.awaiting = 0;
        p->st.position = start_position(p, SOURCE_START_BROKER);
}

static void serve_revoke(struct loopback *lb, const struct lb_event *ev)
{
        if (lb->ev.revoked)
                lb->ev.revoked(lb->ev.opaque, ev->parts, ev->n);
        for (size_t p = 0; p < lb->part_cnt; p++) {
                struct lb_part *lp = &lb->parts[p];
                int listed = !ev->parts;
                for (size_t i = 0; i < ev->n && !listed; i++)
                        listed = ev->parts[i].topic_idx == lp->topic_idx && ev->parts[i].partition == lp->partition;
                if (listed && lp->st.assigned)
                        lb_part_unassign(lp);
        }
}

/* Every rebalance asked for so far, in order (one asked for meanwhile waits for the next poll). */
static void serve_events(struct loopback *lb)
{
        struct lb_event *evs = lb->events;
        size_t n = lb->event_cnt;
        lb->events = NULL;
        lb->event_cnt = 0;
        for (size_t i = 0; i < n; i++) {
                if (evs[i].kind == LB_ASSIGN)
                        serve_assign(lb, &evs[i]);
                else
                        serve_revoke(lb, &evs[i]);
                free(evs[i].parts);
        }
        free(evs);
}

/* ---- messages ----------------------------------------------------------------- */

static struct pl_msg *msg_make(struct loopback *lb, size_t pi, const struct lb_entry *e)
{
        struct lb_part *p = &lb->parts[pi];
        struct lb_msg *lm = xcalloc(1, sizeof(*lm));
        lm->part = pi;
        lm->m = (struct pl_msg){.topic_idx = p->topic_idx,
                                .topic = lb->cfg->topics[p->topic_idx].name,
                                .partition = p->partition,
                                .offset = e->offset,
                                .timestamp_ms = e->timestamp_ms,
                                .key = e->key,
                                .key_len = e->key ? strlen(e->key) : 0,
                                .value = e->value,
                                .value_len = strlen(e->value),
                                .headers = e->headers,
                                .header_cnt = e->header_cnt,
                                .source = lm};
        p->st.position = e->offset + 1;
        p->st.handed++;
        p->st.outstanding++;
        return &lm->m;
}

/* The first message of partition pi at or after its position; past the log's
 * end (a trailing gap), the position moves there and NULL. */
static struct pl_msg *part_next(struct loopback *lb, size_t pi)
{
        struct lb_part *p = &lb->parts[pi];
        if (!p->st.assigned || p->st.paused || p->st.awaiting)
                return NULL;
        for (size_t i = 0; i < p->cnt; i++)
                if (p->log[i]->offset >= p->st.position)
                        return msg_make(lb, pi, p->log[i]);
        if (p->st.position < p->end)
                p->st.position = p->end;
        return NULL;
}

static void wait_ms(int ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
}

/* Partitions take turns, one message each, as a broker interleaves fetches. */
static struct pl_msg *lb_poll(struct source *src, int timeout_ms)
{
        struct loopback *lb = of(src);
        lb->polls++;
        if (lb->on_poll)
                lb->on_poll(lb, lb->poll_opaque);
        serve_events(lb);
        for (size_t k = 0; k < lb->part_cnt; k++) {
                size_t pi = (lb->turn + k) % lb->part_cnt;
                struct pl_msg *m = part_next(lb, pi);
                if (m) {
                        lb->turn = pi + 1;
                        return m;
                }
        }
        if (timeout_ms > 0)
                wait_ms(timeout_ms); /* nothing arrives meanwhile: the test pushes from inside poll */
        return NULL;
}

static void lb_release(struct source *src, struct pl_msg *m)
{
        struct lb_msg *lm = m->source;
        struct lb_part *p = &of(src)->parts[lm->part];
        p->st.released++;
        p->st.outstanding--;
        free(lm);
}

static void lb_ack(struct source *src, const struct pl_commit *commits, size_t n)
{
        struct loopback *lb = of(src);
        for (size_t i = 0; i < n; i++) {
                struct lb_part *p = lb_part_get(lb, lb_topic_idx(lb, commits[i].topic), commits[i].partition);
                if (p->st.acked != LOOPBACK_NONE && commits[i].next_offset < p->st.acked)
                        p->st.acks_backwards++;
                p->st.acked = commits[i].next_offset;
                p->st.acks++;
        }
}

static void lb_done(struct source *src, struct pl_msg *const *msgs, size_t n)
{
        for (size_t i = 0; i < n; i++)
                of(src)->parts[((struct lb_msg *)msgs[i]->source)->part].st.done++;
}

static void lb_pause(struct source *src, const struct pl_part *parts, size_t n, int pause)
{
        struct loopback *lb = of(src);
        for (size_t i = 0; i < n; i++) {
                struct lb_part *p = lb_part_get(lb, parts[i].topic_idx, parts[i].partition);
                p->st.paused = pause;
                if (pause)
                        p->st.pauses++;
                else
                        p->st.resumes++;
        }
}

static int lb_seek(struct source *src, const struct pl_part *parts, const int64_t *start, size_t n, char *err,
                   size_t errsz)
{
        struct loopback *lb = of(src);
        for (size_t i = 0; i < n; i++) {
                struct lb_part *p = lb_part_get(lb, parts[i].topic_idx, parts[i].partition);
                p->st.position = start_position(p, start[i]);
                p->st.awaiting = 0;
                p->st.sought = start[i];
                p->st.seeks++;
        }
        return 0;
}

/* The position moved past offsets that hold nothing, and nothing of the
 * partition is outstanding: from what was acknowledged (or where it started;
 * -1: neither) to the position. */
static size_t lb_skipped(struct source *src, struct pl_skip *out, size_t max)
{
        struct loopback *lb = of(src);
        size_t k = 0;
        for (size_t pi = 0; pi < lb->part_cnt && k < max; pi++) {
                const struct loopback_part_state *st = &lb->parts[pi].st;
                int64_t from = st->acked != LOOPBACK_NONE ? st->acked : st->started >= 0 ? st->started : -1;
                if (!st->assigned || st->awaiting || st->outstanding || st->position <= (from < 0 ? 0 : from))
                        continue;
                out[k++] = (struct pl_skip){lb->parts[pi].topic_idx, lb->parts[pi].partition, from, st->position};
        }
        return k;
}

static const char *lb_failure(struct source *src) { return of(src)->failure; }

static void lb_close(struct source *src) { of(src)->closed = 1; }

static void lb_destroy(struct source *src)
{
        if (of(src)->owned)
                loopback_free(of(src));
}

static int lb_connected(struct source *src, char *why, size_t whysz)
{
        struct loopback *lb = of(src);
        if (!lb->up)
                snprintf(why, whysz, "%s", lb->why);
        return lb->up;
}

const struct source_ops lb_source_ops = {
        .poll = lb_poll,
        .release = lb_release,
        .ack = lb_ack,
        .done = lb_done,
        .pause = lb_pause,
        .seek = lb_seek,
        .failure = lb_failure,
        .close = lb_close,
        .destroy = lb_destroy,
        .skipped = lb_skipped,
        .connected = lb_connected,
};
