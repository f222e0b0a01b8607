/* runner: the daemon's loop — buffers what the source delivers, runs each topic's due batch, acknowledges after COMMIT, decides what fetches. */
#include "core/runner.h"

#include "base/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "base/log.h"
#include "base/timeline.h"
#include "core/absorption.h"
#include "core/batch.h"
#include "core/provenance.h"
#include "core/external.h"
#include "core/instance.h"
#include "core/lanes.h"
#include "core/relay.h"
#include "core/buckets.h"
#include "core/retention.h"
#include "ops/health.h"
#include "ops/metrics.h"
#include "ops/notify.h"
#include "pg/gauges.h"
#include "pg/offsets.h"
#include "pg/parallel_positions.h"
#include "pg/probe.h"

#define POLL_SLICE_MS 100
#define STATS_INTERVAL_MS 10000
/* A topic whose batch has failed this often in a row, or for this long, is
 * stuck: said at ERROR (once a minute), so an operator can alert on it. */
#define STUCK_FAILURES 5
#define STUCK_MS 60000
#define STUCK_REPORT_MS 60000
#define HEALTH_INTERVAL_MS 100
/* With partition workers the source delivers one partition's fetch at a
 * time (Kafka: up to max.partition.fetch.bytes), which one worker's buffer
 * would hold while the others starve: past this many batches buffered, its
 * partitions pause (Kafka holds what it fetched of them, source/kafka/
 * part_queues.h) and the others' messages flow. */
#define BEHIND_BATCHES 16
/* In payload bytes (limits.batch_bytes each), the one in flight and the next:
 * large messages are held back sooner (the RSS stays bounded). */
#define BEHIND_BYTES_BATCHES 2
static const char behind_reason[] = "its worker is behind (batches buffered)";

/*
 * Liveness. Nothing here waits inside a topic: the loop polls, and each
 * topic whose batch is due runs one batch per turn. A failed batch puts its
 * topic in backoff (retry_at); a lost database puts every topic on hold until
 * it is back. Whether a partition fetches is derived, on every turn, from
 * what is actually waiting — its topic's batch in backoff, or the database
 * outage — never remembered across a rebalance: a newly assigned partition
 * is paused or resumed explicitly, so every assigned partition is either
 * fetching or waiting on something that ends.
 */

/* One topic's buffered messages on one lane (the partitions of the topic
 * that worker runs), and the state of its current batch. */
struct tbuf {
        size_t topic, lane;
        size_t inflight;        /* the first inflight messages are a batch its lane runs now; 0: none */
        struct pl_entry **ents; /* each message beside the protocol's state of it (in r->pool) */
        size_t cnt, cap;
        int64_t first_ms;      /* when the oldest buffered message arrived */
        int64_t retry_at;      /* 0: no failed batch waiting; else when it is tried again */
        int backoff_ms;        /* the wait after the next failure */
        int failures;          /* failed attempts in a row */
        int64_t failing_since; /* the first of them */
        int64_t stuck_logged;  /* last ERROR about being stuck */
        int paused;            /* as last applied to its partitions */
        int again;             /* the batch was narrowed (PL_SPLIT): its next try runs on the next turn */
        size_t bytes;          /* payload bytes buffered (limits.batch_bytes) */
        int was_behind;        /* paused because behind (logged at debug) */
        int behind; /* workers: BEHIND_BATCHES batches buffered (or BEHIND_BYTES_BATCHES of bytes), its partitions pause */
};

/* An assigned partition, and whether the source fetches it. */
struct assigned {
        size_t topic_idx;
        int32_t partition;
        int paused;    /* 1 paused, 0 fetching, -1 not yet decided (just assigned) */
        int awaiting;  /* its position must be read from the database before it fetches (see positions, below) */
        int64_t first; /* the earliest position this process knows of it: its start, else its first message; -1 */
        int committed; /* this process committed a batch of it */
};

struct runner {
        const struct config *cfg;
        struct store *store;
        struct pipeline *pl;
        struct sink sink;
        struct source *src;
        struct pl_pool pool;       /* the entries of the buffered messages */
        struct pl_msg **done_msgs; /* room to tell ops->done which messages committed */
        size_t done_cap;
        int64_t last_relay_ms;
        struct tbuf *bufs; /* one per topic and lane: topic * nlanes + lane */
        size_t nbufs, nlanes;
        struct lanes *lanes;
        struct assigned *parts;
        size_t part_cnt, part_cap;
        int drained;         /* the last poll found nothing queued: partial batches need not wait */
        int watch;           /* a partition awaits its position or has no known first: buffer() looks */
        int rewind_warned;   /* a source that cannot be re-positioned was said so */
        int db_down;         /* the database is unreachable: every topic waits */
        int64_t db_retry_at; /* next reconnection attempt */
        int db_backoff_ms;
        int64_t outbox_unsent;  /* >= limits.outbox_backlog: every topic waits for the relay; else -1 */
        int64_t relay_retry_at; /* the broker did not answer the relay: no round before then */
        int relay_backoff_ms;   /* the wait after the next such round; 0: none yet */
        struct log_ratelimit rl_relay;
        struct log_ratelimit rl_db;
        struct log_ratelimit rl_pos; /* positions that could not be read or set */
        int64_t last_stats_ms;
        struct pl_stats last_stats;
        int64_t last_health_ms, last_gauges_ms;
        int64_t last_skip_ms;               /* the last look for offsets skipped (record_skipped) */
        int64_t last_probe_ms;              /* the connection last known to answer (a batch, a probe) */
        uint64_t probe_batches;             /* batches committed by then */
        volatile sig_atomic_t *reload_flag; /* SIGHUP */
        void (*reload_cb)(void *opaque);
        void *reload_opaque;
};

/* ---- buffers ------------------------------------------------------------- */

/* A topic's failed batch is gone (revoked): its backoff no longer applies. */
static void tbuf_reset_retry(struct tbuf *b, int backoff_ms)
{
        b->retry_at = 0;
        b->again = 0;
        b->backoff_ms = backoff_ms;
        b->failures = 0;
        b->failing_since = 0;
}

static int part_takes(struct runner *r, struct pl_msg *m);

/* Whether buffer b holds so much that its partitions should pause (workers
 * only: the serial loop never polls while a batch runs). */
static void tbuf_behind(const struct runner *r, struct tbuf *b)
{
        size_t max = (size_t)r->cfg->topics[b->topic].batch_max_messages, lim = (size_t)r->cfg->limit_batch_bytes;
        if (r->nlanes < 2)
                return;
        if (b->cnt >= BEHIND_BATCHES * max || b->bytes >= BEHIND_BYTES_BATCHES * lim)
                b->behind = 1;
        else if (b->cnt < BEHIND_BATCHES / 2 * max && b->bytes < lim)
                b->behind = 0;
}

/* A partition always runs on the same lane: its order, its crash-loop state. */
static size_t buf_index(const struct runner *r, size_t topic, int32_t partition)
{
        return topic * r->nlanes + (size_t)(partition < 0 ? 0 : partition) % r->nlanes;
}

static void finish(struct runner *r, struct lane_job *j, volatile sig_atomic_t *stop);

/* Every batch in flight finished and booked: before what needs the lanes
 * idle (a purge, a revocation, a reload, the end). */
static void quiesce(struct runner *r)
{
        static volatile sig_atomic_t not_stopping;
        struct lane_job *j;
        while (lanes_any_busy(r->lanes))
                if ((j = lanes_collect(r->lanes, POLL_SLICE_MS)))
                        finish(r, j, &not_stopping);
}

/* The protocol's state of e's message freed, the message given back to its source. */
static void give_back(struct runner *r, struct pl_entry *e) { r->src->ops->release(r->src, pl_pool_give(&r->pool, e)); }

static void buffer(struct runner *r, struct pl_msg *m)
{
        struct tbuf *b = &r->bufs[buf_index(r, m->topic_idx, m->partition)];
        if (r->watch && !part_takes(r, m))
                return;
        if (b->cnt == b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 64;
                struct pl_entry **ne = xrealloc(b->ents, cap * sizeof(*ne));
                b->ents = ne;
                b->cap = cap;
        }
        if (b->cnt == 0)
                b->first_ms = log_now_ms();
        b->ents[b->cnt++] = pl_pool_take(&r->pool, m);
        b->bytes += m->value_len;
        tbuf_behind(r, b);
}

static int part_listed(const struct pl_part *parts, size_t n, size_t topic_idx, int32_t partition)
{
        for (size_t k = 0; k < n; k++)
                if (parts[k].topic_idx == topic_idx && parts[k].partition == partition)
                        return 1;
        return 0;
}

/* Drop buffered messages of revoked partitions (all when parts is NULL):
 * they were never committed and will be delivered to the partition's next
 * owner (or again, from where the partition is re-positioned). */
static void purge(struct runner *r, const struct pl_part *parts, size_t n, const char *whose)
{
        size_t dropped = 0;
        quiesce(r);
        for (size_t bi = 0; bi < r->nbufs; bi++) {
                struct tbuf *b = &r->bufs[bi];
                size_t keep = 0, t = b->topic;
                for (size_t i = 0; i < b->cnt; i++) {
                        struct pl_entry *e = b->ents[i];
                        if (!parts || part_listed(parts, n, t, e->msg->partition)) {
                                b->bytes -= e->msg->value_len;
                                give_back(r, e);
                                dropped++;
                        } else {
                                b->ents[keep++] = e;
                        }
                }
                b->cnt = keep;
                tbuf_behind(r, b);
                if (!b->cnt)
                        tbuf_reset_retry(b, r->cfg->topics[t].retry_backoff_ms);
        }
        if (dropped)
                log_info("runner", "dropped %zu uncommitted buffered messages of %s", dropped, whose);
}

/* ---- the assignment and whether each partition fetches ------------------- */

static void parts_add(struct runner *r, size_t topic_idx, int32_t partition, int64_t start)
{
        if (r->part_cnt == r->part_cap) {
                size_t cap = r->part_cap ? r->part_cap * 2 : 16;
                struct assigned *np = xrealloc(r->parts, cap * sizeof(*np));
                r->parts = np;
                r->part_cap = cap;
        }
        r->parts[r->part_cnt++] = (struct assigned){.topic_idx = topic_idx,
                                                    .partition = partition,
                                                    .paused = -1,
                                                    .awaiting = start == SOURCE_START_LATER,
                                                    .first = start >= 0 ? start : -1};
}

static void parts_remove(struct runner *r, const struct pl_part *revoked, size_t n)
{
        size_t keep = 0;
        for (size_t i = 0; i < r->part_cnt; i++) {
                const struct assigned *a = &r->parts[i];
                if (revoked && !part_listed(revoked, n, a->topic_idx, a->partition))
                        r->parts[keep++] = *a;
        }
        r->part_cnt = keep;
}

/* What a buffer's partitions wait on now, or NULL: they fetch. */
static const char *hold_reason(const struct runner *r, size_t bi)
{
        const struct tbuf *b = &r->bufs[bi];
        if (r->db_down)
                return "the database is unavailable";
        if (r->outbox_unsent >= 0)
                return "the outbox is too far behind (limits.outbox_backlog)";
        if (b->retry_at && b->cnt)
                return "its batch is in backoff";
        if (b->behind)
                return behind_reason;
        return NULL;
}

/* What one partition waits on now, or NULL: it fetches. */
static const char *part_hold_reason(const struct runner *r, const struct assigned *a)
{
        if (a->awaiting)
                return "awaiting its position from the database";
        return hold_reason(r, buf_index(r, a->topic_idx, a->partition));
}

static void log_pause_changes(struct runner *r)
{
        for (size_t bi = 0; bi < r->nbufs; bi++) {
                struct tbuf *b = &r->bufs[bi];
                const char *why = hold_reason(r, bi);
                char lane[32] = "";
                if (!why == !b->paused)
                        continue;
                b->paused = why != NULL;
                int was_behind = b->was_behind;
                b->was_behind = why == behind_reason;
                if (r->nlanes > 1)
                        snprintf(lane, sizeof(lane), " (worker %zu)", b->lane + 1);
                if (why == behind_reason || (!why && was_behind)) /* every few batches: not worth INFO */
                        log_debug("runner", "topic %s%s: %s fetching%s%s", r->cfg->topics[b->topic].name, lane,
                                  why ? "paused" : "resumed", why ? ": " : "", why ? why : "");
                else if (why)
                        log_info("runner", "topic %s%s: paused fetching: %s", r->cfg->topics[b->topic].name, lane, why);
                else
                        log_info("runner", "topic %s%s: resumed fetching", r->cfg->topics[b->topic].name, lane);
        }
}

/* Pause or resume exactly the partitions whose wanted state differs from
 * what the source has (or is not known yet: just assigned). */
static void apply_pauses(struct runner *r)
{
        struct pl_part pause[r->part_cnt ? r->part_cnt : 1], resume[r->part_cnt ? r->part_cnt : 1];
        size_t np = 0, nr = 0;
        for (size_t i = 0; i < r->part_cnt; i++) {
                struct assigned *a = &r->parts[i];
                int want = part_hold_reason(r, a) != NULL;
                if (a->paused == want)
                        continue;
                if (want)
                        pause[np++] = (struct pl_part){a->topic_idx, a->partition};
                else
                        resume[nr++] = (struct pl_part){a->topic_idx, a->partition};
                a->paused = want;
        }
        if (np)
                r->src->ops->pause(r->src, pause, np, 1);
        if (nr)
                r->src->ops->pause(r->src, resume, nr, 0);
        log_pause_changes(r);
}

/* ---- positions from the database ------------------------------------------- */

/*
 * The offsets table is authoritative, on assignment and after: the database
 * dedupd reconnects to may be a promoted replica that lost the last commits
 * (effects, keys and positions together), so after every reconnect — and
 * when a batch finds the database behind what this process committed —
 * every owned partition awaits its position: what is buffered of it is
 * dropped, it is paused, and before its next batch it is read from the
 * database and the source is moved there (seek). A partition whose position
 * the database cannot say at assignment waits the same way.
 */

static struct assigned *part_find(struct runner *r, size_t topic_idx, int32_t partition)
{
        for (size_t i = 0; i < r->part_cnt; i++)
                if (r->parts[i].topic_idx == topic_idx && r->parts[i].partition == partition)
                        return &r->parts[i];
        return NULL;
}

/* Whether buffer() must look at each message: a partition awaits its
 * position, or its first message is not known yet. */
static void watch_update(struct runner *r)
{
        r->watch = 0;
        for (size_t i = 0; i < r->part_cnt; i++)
                if (r->parts[i].awaiting || r->parts[i].first < 0)
                        r->watch = 1;
}

/* A message of a partition that awaits its position is dropped (it is
 * fetched again from there: given back before the protocol knew of it); the
 * first a partition delivers is remembered. */
static int part_takes(struct runner *r, struct pl_msg *m)
{
        struct assigned *a = part_find(r, m->topic_idx, m->partition);
        if (a && a->awaiting) {
                r->src->ops->release(r->src, m);
                return 0;
        }
        if (a && a->first < 0) {
                a->first = m->offset;
                watch_update(r);
        }
        return 1;
}

/* The database may have changed under dedupd (why): every owned partition
 * awaits its position. A source that cannot rewind (no seek: RabbitMQ's) is
 * said so, once. */
static void positions_lost(struct runner *r, const char *why)
{
        if (!r->part_cnt || !r->src)
                return;
        if (!r->src->ops->seek) {
                if (!r->rewind_warned)
                        log_warn(
                                "runner",
                                "%s: this broker cannot re-position its consumers: what a failed-over database "
                                "lost of the last commits is not consumed again (docs/operating.md: Database failover)",
                                why);
                r->rewind_warned = 1;
                /* It goes on from where it is: what this process committed
                 * no longer says where the database must be. */
                quiesce(r);
                for (size_t i = 0; i < r->part_cnt; i++)
                        pipeline_forget(r->pl, r->parts[i].topic_idx, r->parts[i].partition);
                return;
        }
        struct pl_part parts[r->part_cnt];
        for (size_t i = 0; i < r->part_cnt; i++) {
                r->parts[i].awaiting = 1;
                parts[i] = (struct pl_part){r->parts[i].topic_idx, r->parts[i].partition};
        }
        log_info("runner", "%s: re-positioning %zu partition(s) from the database before their next batch", why,
                 r->part_cnt);
        purge(r, parts, r->part_cnt, "partitions being re-positioned");
        r->watch = 1;
}

/* Where partition a starts again, given its stored position (-1: no row).
 * With no row, never the broker's committed offset when this process
 * committed batches of it: that is ahead of a database that lost them. */
static int64_t restart_at(const struct runner *r, const struct assigned *a, int64_t stored)
{
        const char *topic = r->cfg->topics[a->topic_idx].name;
        if (stored >= 0) {
                log_info("runner", "%s/%d: positioned at offset %" PRId64 " (database)", topic, (int)a->partition,
                         stored);
                return stored;
        }
        if (a->committed)
                log_warn("runner",
                         "%s/%d: no position in the database although this process committed batches of "
                         "it: starting again at offset %" PRId64 ", the earliest it knows",
                         topic, (int)a->partition, a->first);
        else if (a->first >= 0)
                log_info("runner",
                         "%s/%d: no database position: starting again at offset %" PRId64
                         ", where this process started",
                         topic, (int)a->partition, a->first);
        else
                log_info("runner",
                         "%s/%d: no database position, starting where the broker is (Kafka: the committed "
                         "offset)",
                         topic, (int)a->partition);
        return a->first >= 0 ? a->first : SOURCE_START_BROKER;
}

static void db_lost(struct runner *r, const char *ctx, const char *err);

/* A parallel topic's partitions whose every worker committed past the
 * stored position (a crash between the workers' commits and the
 * partition's) are moved up to the least of them before they are read
 * (pg/parallel_positions.h); what committed above it is absorbed. */
static void parallel_resume(struct runner *r, size_t t)
{
        const struct topic_conf *tc = &r->cfg->topics[t];
        size_t moved = 0;
        char err[512];
        if (tc->parallel_workers < 2)
                return;
        if (store_parallel_resume(r->store, r->cfg->namespace, tc->name, tc->parallel_layout, tc->parallel_workers,
                                  &moved, err, sizeof(err)))
                log_warn("runner", "topic %s: reading the parallel workers' positions: %s", tc->name, err);
        else if (moved)
                log_info("runner", "topic %s: %zu partition(s) moved up to what every parallel worker had committed",
                         tc->name, moved);
}

/* The awaiting partitions of topic t: read, moved there, no longer awaiting.
 * -1 when the database or the broker did not answer (they keep waiting). */
static int position_topic(struct runner *r, size_t t)
{
        size_t n = r->part_cnt ? r->part_cnt : 1, k = 0;
        struct pl_part parts[n];
        struct assigned *as[n];
        int32_t pids[n];
        int64_t offs[n], start[n];
        char err[512];
        for (size_t i = 0; i < r->part_cnt; i++)
                if (r->parts[i].awaiting && r->parts[i].topic_idx == t) {
                        as[k] = &r->parts[i];
                        pids[k] = r->parts[i].partition;
                        parts[k++] = (struct pl_part){t, r->parts[i].partition};
                }
        if (!k)
                return 0;
        parallel_resume(r, t);
        enum store_rc rc =
                store_offsets_get(r->store, r->cfg->namespace, r->cfg->topics[t].name, k, pids, offs, err, sizeof(err));
        if (rc == STORE_CONN) {
                db_lost(r, "runner", err);
                return -1;
        }
        if (rc) {
                log_limited(&r->rl_pos, 1, 10000, LOG_WARN, "runner",
                            "topic %s: cannot read positions from the database: %s (its partitions wait, paused)",
                            r->cfg->topics[t].name, err);
                return -1;
        }
        for (size_t j = 0; j < k; j++)
                start[j] = restart_at(r, as[j], offs[j]);
        purge(r, parts, k, "partitions being re-positioned");
        for (size_t j = 0; j < k; j++)
                pipeline_forget(r->pl, t, pids[j]);
        if (r->src->ops->seek(r->src, parts, start, k, err, sizeof(err))) {
                log_limited(&r->rl_pos, 1, 10000, LOG_WARN, "runner",
                            "topic %s: moving the broker's consumer to the database's positions: %s (its partitions "
                            "wait, paused)",
                            r->cfg->topics[t].name, err);
                return -1;
        }
        for (size_t j = 0; j < k; j++)
                as[j]->awaiting = 0;
        return 0;
}

/* Before the next batch: every partition that awaits its position gets it. */
static void positions_read(struct runner *r)
{
        if (r->db_down || !r->watch)
                return;
        for (size_t t = 0; t < r->cfg->topic_cnt; t++)
                if (position_topic(r, t))
                        break;
        watch_update(r);
}

/* ---- what the source tells ------------------------------------------------ */

/* Where the newly assigned partitions of topic t start: the offsets table
 * where it has a row (it moves in the same transaction as the effects). When
 * it cannot be read they wait for it (SOURCE_START_LATER): the broker's
 * committed offset may be ahead of a database that failed over. A source
 * that cannot be moved later (RabbitMQ) starts where the broker has it. */
static void start_positions(struct runner *r, size_t t, const struct pl_part *parts, size_t n, int64_t *start)
{
        const char *topic = r->cfg->topics[t].name;
        int32_t pids[n ? n : 1];
        int64_t offs[n ? n : 1];
        size_t idx[n ? n : 1], k = 0;
        char err[512];

        for (size_t i = 0; i < n; i++)
                if (parts[i].topic_idx == t) {
                        idx[k] = i;
                        pids[k++] = parts[i].partition;
                }
        if (!k)
                return;
        /* While the database is known to be down, do not block the rebalance
         * on a connection attempt. */
        if (!r->db_down)
                parallel_resume(r, t);
        if (r->db_down || store_offsets_get(r->store, r->cfg->namespace, topic, k, pids, offs, err, sizeof(err))) {
                int later = r->src && r->src->ops->seek;
                log_warn("runner", "cannot read start offsets from the database (%s); %s %s",
                         r->db_down ? "it is unavailable" : err, later ? "pausing the partitions of" : "starting",
                         topic);
                for (size_t j = 0; later && j < k; j++) {
                        start[idx[j]] = SOURCE_START_LATER;
                        log_info("runner", "assigned %s/%d: paused, awaiting its position from the database", topic,
                                 (int)pids[j]);
                }
                return;
        }
        for (size_t j = 0; j < k; j++) {
                start[idx[j]] = offs[j];
                if (offs[j] >= 0)
                        log_info("runner", "assigned %s/%d: starting at offset %" PRId64 " (database)", topic,
                                 (int)pids[j], offs[j]);
                else
                        log_info("runner",
                                 "assigned %s/%d: no database position, starting where the broker is "
                                 "(Kafka: the committed offset)",
                                 topic, (int)pids[j]);
        }
}

static void on_assigned(void *opaque, const struct pl_part *parts, size_t n, int64_t *start)
{
        struct runner *r = opaque;
        if (!r->db_down && !store_ok(r->store)) {
                char err[512];
                if (store_connect(r->store, err, sizeof(err)) != STORE_OK)
                        r->db_down = 1; /* the loop reconnects with backoff */
                else
                        positions_lost(r, "database reconnected"); /* what stays assigned (an incremental assignment) */
        }
        for (size_t t = 0; t < r->cfg->topic_cnt; t++)
                start_positions(r, t, parts, n, start);
        for (size_t i = 0; i < n; i++)
                parts_add(r, parts[i].topic_idx, parts[i].partition, start[i]);
        watch_update(r);
}

static void on_revoked(void *opaque, const struct pl_part *parts, size_t n)
{
        struct runner *r = opaque;
        log_info("runner", "%zu partitions revoked", parts ? n : r->part_cnt);
        purge(r, parts, n, "revoked partitions");
        for (size_t i = 0; i < r->part_cnt; i++)
                if (!parts || part_listed(parts, n, r->parts[i].topic_idx, r->parts[i].partition)) {
                        pipeline_forget(r->pl, r->parts[i].topic_idx, r->parts[i].partition);
                        metrics_lag(r->cfg->topics[r->parts[i].topic_idx].name, r->parts[i].partition, -1);
                }
        parts_remove(r, parts, n);
        watch_update(r);
        if (parts && r->part_cnt) /* an incremental revoke: still in the group */
                health_assigned(r->part_cnt);
        else
                health_unassigned();
}

static void on_settled(void *opaque)
{
        struct runner *r = opaque;
        char status[96];
        apply_pauses(r);
        health_assigned(r->part_cnt);
        snprintf(status, sizeof(status), "in the group, %zu partition(s) assigned", r->part_cnt);
        notify_ready(status); /* systemd: started, after the first assignment */
}

struct source_events runner_events(struct runner *r)
{
        return (struct source_events){
                .assigned = on_assigned, .settled = on_settled, .revoked = on_revoked, .opaque = r};
}

/* ---- batches ----------------------------------------------------------------- */

/* When topic t's batch should run next (INT64_MAX: nothing buffered, or
 * everything waits on the database). */
static int64_t batch_due_at(const struct runner *r, size_t bi)
{
        const struct tbuf *b = &r->bufs[bi];
        const struct topic_conf *tc = &r->cfg->topics[b->topic];
        if (!b->cnt || b->inflight || r->db_down || r->outbox_unsent >= 0)
                return INT64_MAX;
        if (b->again)
                return 0;
        if (b->retry_at)
                return b->retry_at;
        if (b->cnt >= (size_t)tc->batch_max_messages || b->bytes >= (size_t)r->cfg->limit_batch_bytes ||
            (tc->batch_adaptive && r->drained))
                return 0;
        return b->first_ms + tc->batch_max_wait_ms;
}

static void batch_done(struct runner *r, size_t bi, size_t n)
{
        struct tbuf *b = &r->bufs[bi];
        size_t t = b->topic;
        for (size_t i = 0; i < n; i++) {
                b->bytes -= b->ents[i]->msg->value_len;
                give_back(r, b->ents[i]);
        }
        memmove(b->ents, b->ents + n, (b->cnt - n) * sizeof(*b->ents));
        b->cnt -= n;
        tbuf_behind(r, b);
        b->first_ms = log_now_ms();
        if (b->failures) {
                char ctx[160];
                snprintf(ctx, sizeof(ctx), "topic:%s", r->cfg->topics[t].name);
                log_info(ctx, "batch committed after %d failed attempt(s)", b->failures);
        }
        tbuf_reset_retry(b, r->cfg->topics[t].retry_backoff_ms);
}

static void db_lost(struct runner *r, const char *ctx, const char *err)
{
        log_limited(&r->rl_db, 1, 10000, LOG_ERROR, ctx,
                    "database unavailable: %s: %s; pausing, retrying every %d ms at most", store_target(r->store), err,
                    r->cfg->db_retry_max_ms);
        r->db_down = 1;
        r->db_retry_at = log_now_ms() + r->db_backoff_ms;
}

/* Every STUCK_REPORT_MS, a topic that keeps failing says so at ERROR. */
static void report_stuck(struct runner *r, size_t bi, const char *ctx, const struct pl_msg *first, const char *err)
{
        struct tbuf *b = &r->bufs[bi];
        int64_t now = log_now_ms();
        if (b->failures < STUCK_FAILURES && now - b->failing_since < STUCK_MS)
                return;
        if (b->stuck_logged && now - b->stuck_logged < STUCK_REPORT_MS)
                return;
        b->stuck_logged = now;
        log_error(ctx,
                  "stuck: the batch from partition %d offset %" PRId64 " has failed %d times "
                  "over %" PRId64 " s (%s); this topic waits, the others go on",
                  (int)first->partition, first->offset, b->failures, (now - b->failing_since) / 1000, err);
}

static void batch_failed(struct runner *r, size_t bi, size_t n, const char *err)
{
        struct tbuf *b = &r->bufs[bi];
        const struct topic_conf *tc = &r->cfg->topics[b->topic];
        char ctx[160];
        snprintf(ctx, sizeof(ctx), "topic:%s", tc->name);
        if (!b->failures)
                b->failing_since = log_now_ms();
        b->failures++;
        log_warn(ctx, "batch of %zu not finished: %s; retrying in %d ms", n, err, b->backoff_ms);
        b->retry_at = log_now_ms() + b->backoff_ms;
        b->backoff_ms = b->backoff_ms * 2 > tc->retry_backoff_max_ms ? tc->retry_backoff_max_ms : b->backoff_ms * 2;
        if (b->backoff_ms < 1)
                b->backoff_ms = 1;
        report_stuck(r, bi, ctx, b->ents[0]->msg, err);
}

/* The messages the next batch of topic t takes: batch.max_messages at most,
 * and no more payload bytes than limits.batch_bytes (but at least one). */
static size_t batch_size(const struct runner *r, size_t bi)
{
        const struct tbuf *b = &r->bufs[bi];
        size_t t = b->topic;
        size_t max = (size_t)r->cfg->topics[t].batch_max_messages, bytes = 0, n = 0;
        while (n < b->cnt && n < max) {
                if (n > 0 && bytes + b->ents[n]->msg->value_len > (size_t)r->cfg->limit_batch_bytes) {
                        log_debug("runner",
                                  "topic %s: batch of %zu closed at %zu payload bytes (limits.batch_bytes %d)",
                                  r->cfg->topics[t].name, n, bytes, r->cfg->limit_batch_bytes);
                        break;
                }
                bytes += b->ents[n++]->msg->value_len;
        }
        return n;
}

/* A batch that did not commit (or committed only in part): why, and when it is tried again. */
static void batch_not_done(struct runner *r, size_t bi, size_t n, enum pl_rc rc, const char *err,
                           volatile sig_atomic_t *stop)
{
        char ctx[160];
        snprintf(ctx, sizeof(ctx), "topic:%s", r->cfg->topics[r->bufs[bi].topic].name);
        if (*stop)
                log_info(ctx, "shutting down: batch of %zu rolled back, it will be redelivered", n);
        else if (rc == PL_DB_DOWN)
                db_lost(r, ctx, err);
        else if (rc == PL_REPOSITION) {
                log_warn(ctx,
                         "the database changed under dedupd: %s (a failover to a replica that lost the last "
                         "commits, or a restore); batch of %zu rolled back",
                         err, n);
                positions_lost(r, "the database is behind this process's commits");
        } else if (rc == PL_SPLIT)
                log_debug(ctx, "batch of %zu failed (%s): its first half is tried next", n, err);
        else
                batch_failed(r, bi, n, err);
}

/* Buffer bi's next batch, handed to its lane (run at once when there is
 * one lane: the serial loop). Its messages stay at the front of the buffer,
 * in flight, until the lane is done with them. */
static void dispatch(struct runner *r, size_t bi, volatile sig_atomic_t *stop)
{
        struct tbuf *b = &r->bufs[bi];
        size_t n = batch_size(r, bi); /* n: up to 100,000 */
        struct lane_job *j = lane_job_new(b->lane, b->topic, bi, b->ents, n);
        b->inflight = n;
        if (!lanes_threaded(r->lanes))
                timeline_begin();
        lanes_submit(r->lanes, j);
        if (!lanes_threaded(r->lanes) && (j = lanes_collect(r->lanes, 0)))
                finish(r, j, stop);
}

/* After the ack: the source learns exactly which messages (b's first n) committed. */
static void tell_done(struct runner *r, const struct tbuf *b, size_t n)
{
        if (n > r->done_cap) {
                r->done_msgs = xrealloc(r->done_msgs, n * sizeof(*r->done_msgs));
                r->done_cap = n;
        }
        for (size_t i = 0; i < n; i++)
                r->done_msgs[i] = b->ents[i]->msg;
        r->src->ops->done(r->src, r->done_msgs, n);
}

/* A lane's batch is over: committed and acknowledged, or put in backoff. */
static void finish(struct runner *r, struct lane_job *j, volatile sig_atomic_t *stop)
{
        struct tbuf *b = &r->bufs[j->buf];
        size_t n = j->taken, bi = j->buf;
        enum pl_rc rc = j->rc;
        int serial = !lanes_threaded(r->lanes);

        b->inflight = 0;
        pipeline_settle(r->pl, j->lane);
        b->again = rc == PL_SPLIT;
        /* What committed is acknowledged: the batch, or what a partial one (external mode) finished. */
        if (j->nc > 0)
                r->src->ops->ack(r->src, j->commits, j->nc);
        if (serial)
                timeline_mark("ack");
        for (size_t i = 0; i < j->nc; i++) {
                struct assigned *a = part_find(r, j->topic, j->commits[i].partition);
                if (a)
                        a->committed = 1;
        }
        if (rc != PL_OK) {
                batch_not_done(r, bi, n ? n : j->n, rc, j->err, stop);
        } else {
                if (r->src->ops->done)
                        tell_done(r, b, n);
                fault_point("after_ack");
                batch_done(r, bi, n);
        }
        if (serial && rc == PL_OK) {
                timeline_mark("release");
                timeline_end(n);
        }
        lane_job_free(j);
}

/* Every finished batch, booked (without waiting for one). */
static void collect(struct runner *r, volatile sig_atomic_t *stop)
{
        struct lane_job *j;
        while ((j = lanes_collect(r->lanes, 0)))
                finish(r, j, stop);
}

/* ---- the database, housekeeping ------------------------------------------------ */

/* While the database is down: reconnect when its backoff has passed. */
static void db_reconnect(struct runner *r)
{
        char err[512];
        if (!r->db_down || log_now_ms() < r->db_retry_at)
                return;
        if (store_connect(r->store, err, sizeof(err)) == STORE_OK) {
                log_ratelimit_flush(&r->rl_db);
                log_info("runner", "database reconnected: %s", store_target(r->store));
                r->db_down = 0;
                r->db_backoff_ms = 100;
                /* It may be another server (a promoted replica) that lost the last commits. */
                positions_lost(r, "database reconnected");
                return;
        }
        log_limited(&r->rl_db, 1, 10000, LOG_ERROR, "runner", "database still unavailable: %s: %s",
                    store_target(r->store), err);
        r->db_backoff_ms =
                r->db_backoff_ms * 2 > r->cfg->db_retry_max_ms ? r->cfg->db_retry_max_ms : r->db_backoff_ms * 2;
        r->db_retry_at = log_now_ms() + r->db_backoff_ms;
}

/* The relay published everything there was. */
static void outbox_drained(struct runner *r)
{
        if (r->outbox_unsent >= 0)
                log_info("outbox", "relay caught up: fetching resumes (limits.outbox_backlog %d)",
                         r->cfg->limit_outbox_backlog);
        r->outbox_unsent = -1;
}

/* The relay left rows unsent (it failed, or there are more than it publishes
 * in one turn): past limits.outbox_backlog, every topic waits for it. */
static void outbox_behind(struct runner *r)
{
        int64_t limit = r->cfg->limit_outbox_backlog, unsent;
        char err[512];
        if (limit <= 0 || store_outbox_backlog(r->store, r->cfg->namespace, limit, &unsent, err, sizeof(err)))
                return;
        if (unsent < limit) {
                if (r->outbox_unsent >= 0)
                        outbox_drained(r);
                return;
        }
        if (r->outbox_unsent < 0)
                log_warn("outbox",
                         "%" PRId64 " or more outbox rows are unsent, limits.outbox_backlog is %" PRId64
                         ": every topic pauses fetching until the relay has published below it",
                         unsent, limit);
        r->outbox_unsent = unsent;
}

/* The relay could not reach the broker (rows left unsent): no round until
 * a backoff has passed, doubling up to RELAY_BACKOFF_MAX_MS. No row is
 * counted for it: an outage is nobody's row's fault. */
#define RELAY_BACKOFF_MAX_MS 30000
static void relay_stalled(struct runner *r, const struct relay_round *rd)
{
        int first = r->cfg->outbox_retry_backoff_ms > r->cfg->outbox_interval_ms ? r->cfg->outbox_retry_backoff_ms
                                                                                 : r->cfg->outbox_interval_ms;
        r->relay_backoff_ms = !r->relay_backoff_ms ? first : r->relay_backoff_ms * 2;
        if (r->relay_backoff_ms > RELAY_BACKOFF_MAX_MS)
                r->relay_backoff_ms = RELAY_BACKOFF_MAX_MS;
        r->relay_retry_at = log_now_ms() + r->relay_backoff_ms;
        log_limited(&r->rl_relay, 1, 30000, LOG_WARN, "outbox",
                    "relay: %zu row(s) not published: %s; they wait, trying again in %d ms", rd->unsent,
                    rd->unsent_reason, r->relay_backoff_ms);
}

/* One relay pass: rounds while they come back full and clean. A round with
 * a failure ends the pass (its rows wait in their backoff; the next pass,
 * an interval later, takes the rows behind them). 1 when rows were left. */
static int relay_rounds(struct runner *r)
{
        char err[512];
        for (int round = 0; round < 100; round++) {
                struct relay_round rd;
                if (relay_run(r->store, &r->sink, r->cfg, &rd, err, sizeof(err))) {
                        log_warn("outbox", "relay: %s (rows stay unsent and are retried)", err);
                        return 1;
                }
                if (rd.sent)
                        log_debug("outbox", "published %zu message(s)", rd.sent);
                if (rd.unsent) {
                        relay_stalled(r, &rd);
                        return 1;
                }
                if (r->relay_backoff_ms) {
                        log_ratelimit_flush(&r->rl_relay);
                        log_info("outbox", "relay: the broker takes rows again");
                }
                r->relay_backoff_ms = 0;
                if (rd.failed)
                        return 1;
                if (rd.taken < (size_t)r->cfg->outbox_batch)
                        return 0;
        }
        return 1;
}

/* Publish what committed batches wrote to the outbox: right after a batch
 * that wrote some, and every outbox.interval_ms for rows a crash left behind
 * or whose backoff ended. */
static void relay(struct runner *r, int force)
{
        int64_t now = log_now_ms();
        if (!store_ok(r->store) || now < r->relay_retry_at)
                return;
        if (!force && now - r->last_relay_ms < r->cfg->outbox_interval_ms)
                return;
        r->last_relay_ms = now;
        /* While paused, every pass counts again: rows waiting in a backoff
         * still hold the topics, given-up ones no longer do. */
        if (relay_rounds(r) || r->outbox_unsent >= 0)
                outbox_behind(r);
        else
                outbox_drained(r);
}

static void log_stats(struct runner *r)
{
        const struct pl_stats *s = pipeline_stats(r->pl);
        int64_t now = log_now_ms();
        double secs = (double)(now - r->last_stats_ms) / 1000.0;
        if (s->consumed != r->last_stats.consumed || s->retries != r->last_stats.retries)
                log_info("stats",
                         "consumed %" PRIu64 " (%.0f/s), applied %" PRIu64 ", rejected %" PRIu64 ", duplicates %" PRIu64
                         ", dead-lettered %" PRIu64 ", batches %" PRIu64 ", retries %" PRIu64,
                         s->consumed, secs > 0 ? (double)(s->consumed - r->last_stats.consumed) / secs : 0.0,
                         s->applied, s->rejected, s->duplicates, s->dead_lettered, s->batches, s->retries);
        r->last_stats = *s;
        r->last_stats_ms = now;
}

/* Whether the source reaches its broker, for /readyz. */
static void publish_broker(struct runner *r)
{
        char why[512] = "";
        int up = !r->src || !r->src->ops->connected || r->src->ops->connected(r->src, why, sizeof(why));
        health_broker(up, why);
}

/* Between batches: the outbox relay, purge, the reaper and the stats line. */
/* What /healthz and /readyz answer, every HEALTH_INTERVAL_MS. */
static void publish_health(struct runner *r, int64_t now)
{
        if (now - r->last_health_ms < HEALTH_INTERVAL_MS)
                return;
        r->last_health_ms = now;
        health_beat(now);
        notify_watchdog(now);
        health_db(!r->db_down);
        publish_broker(r);
        for (size_t t = 0; t < r->cfg->topic_cnt; t++) {
                int stuck = 0;
                for (size_t l = 0; l < r->nlanes; l++) {
                        const struct tbuf *b = &r->bufs[t * r->nlanes + l];
                        stuck |= b->failures >= STUCK_FAILURES || (b->failures && now - b->failing_since >= STUCK_MS);
                }
                health_stuck(t, stuck);
        }
}

/* The gauges read from the database, every http.gauges_interval_ms when served. */
static void read_gauges(struct runner *r, int64_t now)
{
        struct store_gauges g;
        char err[512];
        if (!*r->cfg->http_listen || now - r->last_gauges_ms < r->cfg->http_gauges_interval_ms || !store_idle(r->store))
                return;
        r->last_gauges_ms = now;
        if (store_read_gauges(r->store, r->cfg->namespace, &g, err, sizeof(err)) == STORE_OK) {
                metrics_pending((uint64_t)g.pending, g.pending_oldest_s);
                metrics_outbox_backlog((uint64_t)g.outbox_unsent);
                metrics_outbox_given_up_rows((uint64_t)g.outbox_given_up);
        } else {
                log_debug("runner", "reading the gauges: %s", err);
        }
}

/* A partition's offsets that hold no message — a transactional producer's
 * markers and aborted records — are recorded where the source proved them
 * (nothing outstanding, its position beyond): in dedupd.offsets first, and
 * acknowledged only after that statement committed, so lag reaches 0 while
 * the partition is idle. */
#define SKIP_INTERVAL_MS 1000
static void record_skipped_topic(struct runner *r, size_t t, const struct pl_skip *sk, size_t n)
{
        const char *topic = r->cfg->topics[t].name;
        int32_t parts[n];
        int64_t from[n], to[n];
        int moved[n];
        struct pl_commit commits[n];
        size_t k = 0, nc = 0;
        char err[512];

        for (size_t i = 0; i < n; i++) {
                const struct assigned *a = part_find(r, t, sk[i].partition);
                /* One that awaits its position from the database is not moved from here. */
                if (sk[i].topic_idx == t && a && !a->awaiting) {
                        parts[k] = sk[i].partition;
                        from[k] = sk[i].from;
                        to[k++] = sk[i].to;
                }
        }
        if (!k)
                return;
        enum store_rc rc =
                store_offsets_skip(r->store, r->cfg->namespace, topic, k, parts, from, to, moved, err, sizeof(err));
        if (rc == STORE_CONN) {
                db_lost(r, "runner", err);
                return;
        }
        if (rc) {
                log_limited(&r->rl_db, 1, 60000, LOG_WARN, "runner", "recording skipped offsets of %s: %s", topic, err);
                return;
        }
        for (size_t j = 0; j < k; j++)
                if (moved[j]) {
                        log_debug("runner",
                                  "%s/%d: offsets %" PRId64 "..%" PRId64 " hold no message "
                                  "(transaction markers, aborted records): position %" PRId64,
                                  topic, (int)parts[j], from[j], to[j] - 1, to[j]);
                        commits[nc++] = (struct pl_commit){topic, parts[j], to[j]};
                }
        if (nc)
                r->src->ops->ack(r->src, commits, nc);
}

static void record_skipped(struct runner *r, int64_t now)
{
        if (!r->src->ops->skipped || !r->part_cnt || now - r->last_skip_ms < SKIP_INTERVAL_MS || !store_idle(r->store))
                return;
        r->last_skip_ms = now;
        struct pl_skip sk[r->part_cnt];
        size_t n = r->src->ops->skipped(r->src, sk, r->part_cnt);
        for (size_t t = 0; t < r->cfg->topic_cnt && n; t++)
                record_skipped_topic(r, t, sk, n);
}

/* While the topics are idle nothing else notices a database that went
 * away, and readiness would go on saying it is there: once no batch has
 * used the connection for postgres.probe_interval_ms, a bounded probe (pg/probe.h).
 * A failed one is a lost database like any other (the loop reconnects). */
static void probe_db(struct runner *r, int64_t now)
{
        const struct pl_stats *s = pipeline_stats(r->pl);
        char err[512];
        if (!r->cfg->db_probe_interval_ms || r->db_down)
                return;
        if (s->batches != r->probe_batches) {
                r->probe_batches = s->batches;
                r->last_probe_ms = now;
                return;
        }
        if (now - r->last_probe_ms < r->cfg->db_probe_interval_ms)
                return;
        r->last_probe_ms = now;
        if (store_probe(r->store, r->cfg->db_probe_timeout_ms, err, sizeof(err)) != STORE_OK)
                db_lost(r, "runner", err);
}

static void housekeeping(struct runner *r, int64_t now)
{
        if (now - r->last_stats_ms >= STATS_INTERVAL_MS)
                log_stats(r);
        publish_health(r, now);
        probe_db(r, now);
        if (r->db_down)
                return;
        instance_tick(r->store, r->cfg, now); /* first: the relay below may take a while */
        relay(r, pipeline_take_outbox(r->pl) > 0);
        retention_tick(r->store, r->cfg, log_now_ms()); /* every purge.interval_ms */
        buckets_tick(r->store, r->cfg, now);            /* the partitions ahead, every 10 minutes */
        external_reap_tick(r->cfg, r->store, r->pl, now);
        absorption_tick(r->cfg, r->store, r->pl, now);
        if (store_idle(r->store))
                provenance_flush(r->store, r->cfg->namespace, now, 0);
        read_gauges(r, now);
        record_skipped(r, now);
}

/* How long the next poll may wait: until the first batch or reconnection is
 * due; not at all while an adaptive topic has a partial batch (the poll only
 * asks whether more is queued). */
static int poll_timeout(const struct runner *r, int64_t now)
{
        int64_t next = now + POLL_SLICE_MS;
        for (size_t bi = 0; bi < r->nbufs; bi++) {
                int64_t due = batch_due_at(r, bi);
                if (due < next)
                        next = due;
                if (due != INT64_MAX && !r->bufs[bi].retry_at && r->cfg->topics[r->bufs[bi].topic].batch_adaptive)
                        next = now;
        }
        if (r->db_down && r->db_retry_at < next)
                next = r->db_retry_at;
        return next <= now ? 0 : (int)(next - now);
}

/* ---- the loop ---------------------------------------------------------------- */

/* A buffer holds twice what pauses its partitions while its lane is busy
 * (a source that fetches on regardless): poll no more until a
 * lane is done (the broker's client buffers what arrives meanwhile). */
static int backlogged(const struct runner *r)
{
        for (size_t bi = 0; bi < r->nbufs; bi++) {
                const struct tbuf *b = &r->bufs[bi];
                if (b->inflight &&
                    (b->cnt >= 2 * BEHIND_BATCHES * (size_t)r->cfg->topics[b->topic].batch_max_messages ||
                     b->bytes >= 2 * BEHIND_BYTES_BATCHES * (size_t)r->cfg->limit_batch_bytes))
                        return 1;
        }
        return 0;
}

/* One turn's input: a message from the source, or (lanes busy and nothing
 * arrived, or too much buffered) a wait for a lane to finish instead. */
static void fetch(struct runner *r, volatile sig_atomic_t *stop)
{
        int timeout = poll_timeout(r, log_now_ms());
        struct lane_job *j;
        int busy = lanes_any_busy(r->lanes);
        if (busy && backlogged(r)) {
                if ((j = lanes_collect(r->lanes, timeout)))
                        finish(r, j, stop);
                return;
        }
        struct pl_msg *m = r->src->ops->poll(r->src, busy ? 0 : timeout);
        r->drained = !m;
        if (m) {
                buffer(r, m);
                return;
        }
        if (busy && (j = lanes_collect(r->lanes, timeout < 5 ? timeout : 5)))
                finish(r, j, stop);
}

struct runner *runner_new(const struct config *cfg, struct store *store, struct pipeline *pl, struct sink sink,
                          char *err, size_t errsz)
{
        struct runner *r = xcalloc(1, sizeof(*r));
        r->nlanes = pipeline_lanes(pl);
        if (!(r->lanes = lanes_start(pl, r->nlanes > 1, err, errsz))) {
                free(r);
                return NULL;
        }
        r->nbufs = cfg->topic_cnt * r->nlanes;
        r->bufs = xcalloc(r->nbufs ? r->nbufs : 1, sizeof(*r->bufs));
        r->cfg = cfg;
        r->store = store;
        r->pl = pl;
        r->sink = sink;
        r->db_backoff_ms = 100;
        r->outbox_unsent = -1;
        for (size_t bi = 0; bi < r->nbufs; bi++) {
                r->bufs[bi].topic = bi / r->nlanes;
                r->bufs[bi].lane = bi % r->nlanes;
                tbuf_reset_retry(&r->bufs[bi], cfg->topics[bi / r->nlanes].retry_backoff_ms);
        }
        return r;
}

void runner_on_reload(struct runner *r, volatile sig_atomic_t *flag, void (*cb)(void *opaque), void *opaque)
{
        r->reload_flag = flag;
        r->reload_cb = cb;
        r->reload_opaque = opaque;
}

/* A reload waits for the loop, between batches: the settings it changes are read there. */
static void reload(struct runner *r)
{
        if (!r->reload_flag || !*r->reload_flag)
                return;
        quiesce(r);
        *r->reload_flag = 0;
        r->reload_cb(r->reload_opaque);
}

void runner_free(struct runner *r)
{
        if (!r)
                return;
        log_ratelimit_flush(&r->rl_db);
        log_ratelimit_flush(&r->rl_relay);
        log_ratelimit_flush(&r->rl_pos);
        lanes_stop(r->lanes);
        for (size_t bi = 0; bi < r->nbufs; bi++)
                free(r->bufs[bi].ents);
        pl_pool_free(&r->pool);
        free(r->done_msgs);
        free(r->bufs);
        free(r->parts);
        free(r);
}

int runner_run(struct runner *r, struct source *src, volatile sig_atomic_t *stop, char *err, size_t errsz)
{
        const char *failure = NULL;
        r->src = src;
        r->last_stats_ms = log_now_ms();
        while (!*stop && !(failure = src->ops->failure(src))) {
                db_reconnect(r);
                positions_read(r);
                apply_pauses(r);
                collect(r, stop);
                fetch(r, stop);
                int64_t now = log_now_ms();
                /* Each due buffer gets one batch per turn, when its lane is
                 * free: a topic that keeps failing waits in its backoff while
                 * the others go on. */
                for (size_t bi = 0; bi < r->nbufs && !*stop; bi++)
                        if (!lanes_busy(r->lanes, r->bufs[bi].lane) && batch_due_at(r, bi) <= now)
                                dispatch(r, bi, stop);
                housekeeping(r, now);
                reload(r);
        }
        quiesce(r);
        log_stats(r);
        if (!r->db_down && store_idle(r->store))
                provenance_flush(r->store, r->cfg->namespace, log_now_ms(), 1);
        provenance_discard();
        pipeline_stop(r->pl);
        instance_leave(r->store);
        purge(r, NULL, 0, "the partitions this process leaves");
        src->ops->close(src);
        r->src = NULL;
        if (failure) {
                snprintf(err, errsz, "%s", failure);
                return -1;
        }
        return 0;
}
