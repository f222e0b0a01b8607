/* consumer: the Kafka source — polls, batches per topic, feeds the pipeline, acknowledges after COMMIT. */
#include "consumer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "external.h"
#include "fault.h"
#include "log.h"
#include "outbox.h"
#include "retention.h"

#define POLL_SLICE_MS 100
#define STATS_INTERVAL_MS 10000
/* A topic whose batch has failed this often in a row, or for this long, is
 * stuck: said at ERROR (once a minute), so an operator can alert on it. */
#define STUCK_FAILURES 5
#define STUCK_MS 60000
#define STUCK_REPORT_MS 60000

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

/* One topic's buffered messages and the state of its current batch. */
struct tbuf {
        struct pl_msg **msgs;
        size_t cnt, cap;
        int64_t first_ms;      /* when the oldest buffered message arrived */
        int64_t retry_at;      /* 0: no failed batch waiting; else when it is tried again */
        int backoff_ms;        /* the wait after the next failure */
        int failures;          /* failed attempts in a row */
        int64_t failing_since; /* the first of them */
        int64_t stuck_logged;  /* last ERROR about being stuck */
        int paused;            /* as last applied to its partitions */
};

/* An assigned partition, and whether librdkafka fetches it. */
struct assigned {
        size_t topic_idx;
        int32_t partition;
        int paused; /* 1 paused, 0 fetching, -1 not yet decided (just assigned) */
};

struct consumer {
        rd_kafka_t *rk;
        const struct config *cfg;
        struct store *store;
        struct pipeline *pl;
        struct producer *producer;
        int64_t last_relay_ms;
        struct tbuf *bufs; /* one per topic */
        struct assigned *parts;
        size_t part_cnt, part_cap;
        int db_down;          /* the database is unreachable: every topic waits */
        int64_t db_retry_at;  /* next reconnection attempt */
        int db_backoff_ms;
        int fatal;
        char fatal_msg[512];
        struct log_ratelimit rl_kafka, rl_db;
        int64_t last_stats_ms;
        struct pl_stats last_stats;
};

static void msg_free(struct pl_msg *m)
{
        if (!m)
                return;
        pl_msg_clear(m);
        free(m->headers);
        rd_kafka_message_destroy(m->source);
        free(m);
}

static struct pl_msg *msg_wrap(rd_kafka_message_t *rkm)
{
        struct pl_msg *m = calloc(1, sizeof(*m));
        rd_kafka_headers_t *hdrs = NULL;
        rd_kafka_timestamp_type_t tstype;

        if (!m)
                return NULL;
        m->source = rkm;
        m->topic = rd_kafka_topic_name(rkm->rkt);
        m->partition = rkm->partition;
        m->offset = rkm->offset;
        m->timestamp_ms = rd_kafka_message_timestamp(rkm, &tstype);
        m->key = rkm->key;
        m->key_len = rkm->key_len;
        m->value = rkm->payload;
        m->value_len = rkm->len;
        if (rd_kafka_message_headers(rkm, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
                size_t cnt = rd_kafka_header_cnt(hdrs);
                m->headers = calloc(cnt ? cnt : 1, sizeof(*m->headers));
                if (!m->headers) {
                        free(m);
                        return NULL;
                }
                for (size_t i = 0; i < cnt; i++) {
                        const char *name;
                        const void *val;
                        size_t size;
                        if (rd_kafka_header_get_all(hdrs, i, &name, &val, &size))
                                break;
                        m->headers[m->header_cnt++] = (struct dedupd_header){name, val, size};
                }
        }
        return m;
}

static int topic_index(const struct consumer *c, const char *name)
{
        for (size_t i = 0; i < c->cfg->topic_cnt; i++)
                if (!strcmp(c->cfg->topics[i].name, name))
                        return (int)i;
        return -1;
}

/* A topic's failed batch is gone (revoked): its backoff no longer applies. */
static void tbuf_reset_retry(struct tbuf *b, int backoff_ms)
{
        b->retry_at = 0;
        b->backoff_ms = backoff_ms;
        b->failures = 0;
        b->failing_since = 0;
}

/* Drop buffered messages of revoked partitions (all when parts is NULL):
 * they were never committed and will be delivered to the partition's next
 * owner. */
static void purge(struct consumer *c, const rd_kafka_topic_partition_list_t *parts)
{
        size_t dropped = 0;
        for (size_t t = 0; t < c->cfg->topic_cnt; t++) {
                struct tbuf *b = &c->bufs[t];
                size_t keep = 0;
                for (size_t i = 0; i < b->cnt; i++) {
                        struct pl_msg *m = b->msgs[i];
                        int revoked = !parts;
                        for (int k = 0; parts && k < parts->cnt && !revoked; k++)
                                revoked = parts->elems[k].partition == m->partition &&
                                          !strcmp(parts->elems[k].topic, m->topic);
                        if (revoked) {
                                msg_free(m);
                                dropped++;
                        } else {
                                b->msgs[keep++] = m;
                        }
                }
                b->cnt = keep;
                if (!b->cnt)
                        tbuf_reset_retry(b, c->cfg->topics[t].retry_backoff_ms);
        }
        if (dropped)
                log_info("consumer", "dropped %zu uncommitted buffered messages of revoked partitions",
                         dropped);
}

/* ---- the assignment and whether each partition fetches ------------------- */

static void parts_add(struct consumer *c, size_t topic_idx, int32_t partition)
{
        if (c->part_cnt == c->part_cap) {
                size_t cap = c->part_cap ? c->part_cap * 2 : 16;
                struct assigned *np = realloc(c->parts, cap * sizeof(*np));
                if (!np)
                        abort(); /* cannot track the assignment: nothing sane to do */
                c->parts = np;
                c->part_cap = cap;
        }
        c->parts[c->part_cnt++] = (struct assigned){topic_idx, partition, -1};
}

static void parts_remove(struct consumer *c, const rd_kafka_topic_partition_list_t *revoked)
{
        size_t keep = 0;
        for (size_t i = 0; i < c->part_cnt; i++) {
                const struct assigned *a = &c->parts[i];
                int gone = !revoked;
                for (int k = 0; revoked && k < revoked->cnt && !gone; k++)
                        gone = revoked->elems[k].partition == a->partition &&
                               !strcmp(revoked->elems[k].topic, c->cfg->topics[a->topic_idx].name);
                if (!gone)
                        c->parts[keep++] = *a;
        }
        c->part_cnt = keep;
}

/* What a topic's partitions wait on now, or NULL: they fetch. */
static const char *hold_reason(const struct consumer *c, size_t t)
{
        const struct tbuf *b = &c->bufs[t];
        if (c->db_down)
                return "the database is unavailable";
        if (b->retry_at && b->cnt)
                return "its batch is in backoff";
        return NULL;
}

/* Pause or resume exactly the partitions whose wanted state differs from
 * what librdkafka has (or is not known yet: just assigned). */
static void apply_pauses(struct consumer *c)
{
        rd_kafka_topic_partition_list_t *pause = NULL, *resume = NULL;
        for (size_t i = 0; i < c->part_cnt; i++) {
                struct assigned *a = &c->parts[i];
                int want = hold_reason(c, a->topic_idx) != NULL;
                if (a->paused == want)
                        continue;
                rd_kafka_topic_partition_list_t **l = want ? &pause : &resume;
                if (!*l)
                        *l = rd_kafka_topic_partition_list_new((int)c->part_cnt);
                rd_kafka_topic_partition_list_add(*l, c->cfg->topics[a->topic_idx].name, a->partition);
                a->paused = want;
        }
        if (pause) {
                rd_kafka_pause_partitions(c->rk, pause);
                rd_kafka_topic_partition_list_destroy(pause);
        }
        if (resume) {
                rd_kafka_resume_partitions(c->rk, resume);
                rd_kafka_topic_partition_list_destroy(resume);
        }
        for (size_t t = 0; t < c->cfg->topic_cnt; t++) {
                struct tbuf *b = &c->bufs[t];
                const char *why = hold_reason(c, t);
                if (!why == !b->paused)
                        continue;
                b->paused = why != NULL;
                if (why)
                        log_info("consumer", "topic %s: paused fetching: %s", c->cfg->topics[t].name, why);
                else
                        log_info("consumer", "topic %s: resumed fetching", c->cfg->topics[t].name);
        }
}

/* ---- rebalances ------------------------------------------------------------ */

/* Where each newly assigned partition of one topic starts: the offsets table
 * where it has a row (it moves in the same transaction as the effects). */
static void start_positions(struct consumer *c, size_t t, rd_kafka_topic_partition_list_t *parts)
{
        const char *topic = c->cfg->topics[t].name;
        int32_t pids[parts->cnt ? parts->cnt : 1];
        int64_t offs[parts->cnt ? parts->cnt : 1];
        int idx[parts->cnt ? parts->cnt : 1];
        size_t n = 0;
        char err[512];

        for (int i = 0; i < parts->cnt; i++) {
                if (strcmp(parts->elems[i].topic, topic))
                        continue;
                idx[n] = i;
                pids[n++] = parts->elems[i].partition;
                parts_add(c, t, parts->elems[i].partition);
        }
        if (!n)
                return;
        /* While the database is known to be down, do not block the rebalance
         * on a connection attempt: Kafka's committed offset is never ahead of
         * the table, so starting from it can only re-read (absorbed). */
        if (c->db_down || store_offsets_get(c->store, c->cfg->namespace, topic, n, pids, offs, err,
                                            sizeof(err))) {
                log_warn("consumer", "cannot read start offsets from the database (%s); "
                                     "starting %s from Kafka's committed offsets",
                         c->db_down ? "it is unavailable" : err, topic);
                return;
        }
        for (size_t k = 0; k < n; k++) {
                rd_kafka_topic_partition_t *p = &parts->elems[idx[k]];
                p->offset = offs[k] >= 0 ? offs[k] : RD_KAFKA_OFFSET_INVALID;
                if (offs[k] >= 0)
                        log_info("consumer", "assigned %s/%d: starting at offset %" PRId64 " (database)",
                                 topic, (int)p->partition, offs[k]);
                else
                        log_info("consumer", "assigned %s/%d: no database position, "
                                             "starting at the committed offset",
                                 topic, (int)p->partition);
        }
}

/* A crash between COMMIT and the Kafka commit leaves Kafka behind the table;
 * if nothing more arrives on that partition nothing would ever move it, and
 * lag monitoring would show a lag that is not there. Hand Kafka the
 * database's position now. */
static void commit_known_positions(struct consumer *c, const rd_kafka_topic_partition_list_t *parts)
{
        rd_kafka_topic_partition_list_t *known = rd_kafka_topic_partition_list_new(parts->cnt);
        for (int i = 0; i < parts->cnt; i++)
                if (parts->elems[i].offset >= 0)
                        rd_kafka_topic_partition_list_add(known, parts->elems[i].topic,
                                                          parts->elems[i].partition)->offset =
                                parts->elems[i].offset;
        if (known->cnt) {
                rd_kafka_offsets_store(c->rk, known);
                rd_kafka_commit(c->rk, known, 1 /* async */);
        }
        rd_kafka_topic_partition_list_destroy(known);
}

static void assign(struct consumer *c, rd_kafka_topic_partition_list_t *parts)
{
        if (!c->db_down && !store_ok(c->store)) {
                char err[512];
                if (store_connect(c->store, NULL, err, sizeof(err)) != STORE_OK)
                        c->db_down = 1; /* the loop reconnects with backoff */
        }
        for (size_t t = 0; t < c->cfg->topic_cnt; t++)
                start_positions(c, t, parts);
        rd_kafka_assign(c->rk, parts);
        /* The new partitions' fetch state is decided now, from what waits. */
        apply_pauses(c);
        commit_known_positions(c, parts);
}

static void revoke_parts(struct consumer *c, const rd_kafka_topic_partition_list_t *parts)
{
        purge(c, parts);
        for (int i = 0; parts && i < parts->cnt; i++) {
                int t = topic_index(c, parts->elems[i].topic);
                if (t >= 0)
                        pipeline_forget(c->pl, (size_t)t, parts->elems[i].partition);
        }
        parts_remove(c, parts);
        rd_kafka_assign(c->rk, NULL);
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
        struct consumer *c = opaque;
        (void)rk;
        switch (err) {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
                assign(c, parts);
                break;
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
                log_info("consumer", "%d partitions revoked", parts->cnt);
                revoke_parts(c, parts);
                break;
        default:
                log_error("consumer", "rebalance error: %s", rd_kafka_err2str(err));
                revoke_parts(c, NULL);
                break;
        }
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
        (void)rk;
        int l = level <= 3 ? LOG_ERROR : level == 4 ? LOG_WARN : level <= 6 ? LOG_INFO : LOG_DEBUG;
        LOG(l, "kafka", "%s: %s", fac, buf);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
        struct consumer *c = opaque;
        if (err == RD_KAFKA_RESP_ERR__FATAL) {
                char buf[256];
                rd_kafka_fatal_error(rk, buf, sizeof(buf));
                snprintf(c->fatal_msg, sizeof(c->fatal_msg), "fatal Kafka error: %s", buf);
                c->fatal = 1;
                return;
        }
        if (log_ratelimit_ok(&c->rl_kafka, 3, 10000))
                log_warn("kafka", "%s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

struct consumer *consumer_new(const struct config *cfg, struct store *store, struct pipeline *pl,
                              struct producer *producer, char *err, size_t errsz)
{
        struct consumer *c = calloc(1, sizeof(*c));
        rd_kafka_conf_t *conf = NULL;
        rd_kafka_topic_partition_list_t *subs = NULL;
        int user_reset = 0, user_autocommit = 0;

        if (!c) {
                snprintf(err, errsz, "out of memory");
                return NULL;
        }
        c->cfg = cfg;
        c->store = store;
        c->pl = pl;
        c->producer = producer;
        c->db_backoff_ms = 100;
        c->bufs = calloc(cfg->topic_cnt, sizeof(*c->bufs));
        if (!c->bufs) {
                snprintf(err, errsz, "out of memory");
                goto error;
        }
        for (size_t t = 0; t < cfg->topic_cnt; t++)
                tbuf_reset_retry(&c->bufs[t], cfg->topics[t].retry_backoff_ms);
        conf = rd_kafka_conf_new();
        for (size_t i = 0; i < cfg->kafka_cnt; i++) {
                if (!strcmp(cfg->kafka[i].name, "auto.offset.reset"))
                        user_reset = 1;
                if (!strcmp(cfg->kafka[i].name, "enable.auto.commit"))
                        user_autocommit = 1;
                if (rd_kafka_conf_set(conf, cfg->kafka[i].name, cfg->kafka[i].value, err, errsz) !=
                    RD_KAFKA_CONF_OK)
                        goto error;
        }
        /* Offsets are stored only after the database COMMIT. */
        if (rd_kafka_conf_set(conf, "enable.auto.offset.store", "false", err, errsz) ||
            (!user_reset && rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", err, errsz)) ||
            (!user_autocommit && rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, errsz)))
                goto error;
        rd_kafka_conf_set_opaque(conf, c);
        rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
        rd_kafka_conf_set_log_cb(conf, log_cb);
        rd_kafka_conf_set_error_cb(conf, error_cb);
        c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, errsz);
        if (!c->rk)
                goto error;
        conf = NULL; /* now owned by rk */
        rd_kafka_poll_set_consumer(c->rk);

        subs = rd_kafka_topic_partition_list_new((int)cfg->topic_cnt);
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                rd_kafka_topic_partition_list_add(subs, cfg->topics[i].name, RD_KAFKA_PARTITION_UA);
        rd_kafka_resp_err_t e = rd_kafka_subscribe(c->rk, subs);
        rd_kafka_topic_partition_list_destroy(subs);
        if (e) {
                snprintf(err, errsz, "subscribe failed: %s", rd_kafka_err2str(e));
                goto error;
        }
        return c;
error:
        if (conf)
                rd_kafka_conf_destroy(conf);
        consumer_free(c);
        return NULL;
}

void consumer_free(struct consumer *c)
{
        if (!c)
                return;
        if (c->bufs) {
                purge(c, NULL);
                for (size_t t = 0; t < c->cfg->topic_cnt; t++)
                        free(c->bufs[t].msgs);
        }
        free(c->bufs);
        free(c->parts);
        if (c->rk)
                rd_kafka_destroy(c->rk);
        free(c);
}

/* ---- polling ---------------------------------------------------------------- */

static void buffer(struct consumer *c, size_t t, struct pl_msg *m)
{
        struct tbuf *b = &c->bufs[t];
        if (b->cnt == b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 64;
                struct pl_msg **nm = realloc(b->msgs, cap * sizeof(*nm));
                if (!nm)
                        abort(); /* a message we cannot hold must not be skipped */
                b->msgs = nm;
                b->cap = cap;
        }
        if (b->cnt == 0)
                b->first_ms = log_now_ms();
        b->msgs[b->cnt++] = m;
}

/* Poll once: buffer a message, or serve callbacks (rebalances, errors). */
static void poll_once(struct consumer *c, int timeout_ms)
{
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(c->rk, timeout_ms);
        if (!rkm)
                return;
        if (rkm->err) {
                if (rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF &&
                    log_ratelimit_ok(&c->rl_kafka, 3, 10000))
                        log_warn("kafka", "consumer: %s", rd_kafka_message_errstr(rkm));
                rd_kafka_message_destroy(rkm);
                return;
        }
        int t = topic_index(c, rd_kafka_topic_name(rkm->rkt));
        struct pl_msg *m = t >= 0 ? msg_wrap(rkm) : NULL;
        if (!m) {
                /* Not buffered, so never acknowledged: redelivered after a restart. */
                log_error("consumer", "cannot buffer a message of %s (out of memory or unknown topic)",
                          rd_kafka_topic_name(rkm->rkt));
                rd_kafka_message_destroy(rkm);
                return;
        }
        buffer(c, (size_t)t, m);
}

/* ---- batches ----------------------------------------------------------------- */

static void acknowledge(struct consumer *c, const struct pl_commit *commits, size_t n)
{
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
        for (size_t i = 0; i < n; i++)
                rd_kafka_topic_partition_list_add(l, commits[i].topic, commits[i].partition)->offset =
                        commits[i].next_offset;
        /* A partition revoked meanwhile is refused here; its next owner starts
         * from the database anyway. */
        rd_kafka_offsets_store(c->rk, l);
        rd_kafka_commit(c->rk, l, 1 /* async */);
        rd_kafka_topic_partition_list_destroy(l);
}

/* When topic t's batch should run next (INT64_MAX: nothing buffered, or
 * everything waits on the database). */
static int64_t batch_due_at(const struct consumer *c, size_t t)
{
        const struct tbuf *b = &c->bufs[t];
        const struct topic_conf *tc = &c->cfg->topics[t];
        if (!b->cnt || c->db_down)
                return INT64_MAX;
        if (b->retry_at)
                return b->retry_at;
        if (b->cnt >= (size_t)tc->batch_max_messages)
                return 0;
        return b->first_ms + tc->batch_max_wait_ms;
}

static void batch_done(struct consumer *c, size_t t, size_t n)
{
        struct tbuf *b = &c->bufs[t];
        for (size_t i = 0; i < n; i++)
                msg_free(b->msgs[i]);
        memmove(b->msgs, b->msgs + n, (b->cnt - n) * sizeof(*b->msgs));
        b->cnt -= n;
        b->first_ms = log_now_ms();
        if (b->failures) {
                char ctx[160];
                snprintf(ctx, sizeof(ctx), "topic:%s", c->cfg->topics[t].name);
                log_info(ctx, "batch committed after %d failed attempt(s)", b->failures);
        }
        tbuf_reset_retry(b, c->cfg->topics[t].retry_backoff_ms);
}

static void db_lost(struct consumer *c, const char *ctx, const char *err)
{
        if (log_ratelimit_ok(&c->rl_db, 1, 10000))
                log_error(ctx, "database unavailable (%s); pausing, retrying every %d ms at most", err,
                          c->cfg->db_retry_max_ms);
        c->db_down = 1;
        c->db_retry_at = log_now_ms() + c->db_backoff_ms;
}

/* Every STUCK_REPORT_MS, a topic that keeps failing says so at ERROR. */
static void report_stuck(struct consumer *c, size_t t, const char *ctx, const struct pl_msg *first,
                         const char *err)
{
        struct tbuf *b = &c->bufs[t];
        int64_t now = log_now_ms();
        if (b->failures < STUCK_FAILURES && now - b->failing_since < STUCK_MS)
                return;
        if (b->stuck_logged && now - b->stuck_logged < STUCK_REPORT_MS)
                return;
        b->stuck_logged = now;
        log_error(ctx, "stuck: the batch from partition %d offset %" PRId64 " has failed %d times "
                       "over %" PRId64 " s (%s); this topic waits, the others go on",
                  (int)first->partition, first->offset, b->failures, (now - b->failing_since) / 1000,
                  err);
}

static void batch_failed(struct consumer *c, size_t t, size_t n, const char *err)
{
        const struct topic_conf *tc = &c->cfg->topics[t];
        struct tbuf *b = &c->bufs[t];
        char ctx[160];
        snprintf(ctx, sizeof(ctx), "topic:%s", tc->name);
        if (!b->failures)
                b->failing_since = log_now_ms();
        b->failures++;
        log_warn(ctx, "batch of %zu not finished: %s; retrying in %d ms", n, err, b->backoff_ms);
        b->retry_at = log_now_ms() + b->backoff_ms;
        b->backoff_ms = b->backoff_ms * 2 > tc->retry_backoff_max_ms ? tc->retry_backoff_max_ms
                                                                     : b->backoff_ms * 2;
        if (b->backoff_ms < 1)
                b->backoff_ms = 1;
        report_stuck(c, t, ctx, b->msgs[0], err);
}

/* One batch of topic t: committed and acknowledged, or put in backoff. */
static void run_batch(struct consumer *c, size_t t, volatile sig_atomic_t *stop)
{
        const struct topic_conf *tc = &c->cfg->topics[t];
        struct tbuf *b = &c->bufs[t];
        size_t n = b->cnt < (size_t)tc->batch_max_messages ? b->cnt : (size_t)tc->batch_max_messages;
        struct pl_commit commits[n + 1];
        size_t nc = 0;
        char err[1024], ctx[160];

        err[0] = '\0';
        n = pipeline_guard(c->pl, t, b->msgs, n);
        fault_point("after_poll");
        enum pl_rc rc = pipeline_process(c->pl, t, b->msgs, n, commits, &nc, err, sizeof(err));
        if (rc == PL_OK) {
                acknowledge(c, commits, nc);
                fault_point("after_ack");
                batch_done(c, t, n);
                return;
        }
        /* A partial batch (external mode): what it committed is acknowledged now. */
        if (nc > 0)
                acknowledge(c, commits, nc);
        snprintf(ctx, sizeof(ctx), "topic:%s", tc->name);
        if (*stop) {
                log_info(ctx, "shutting down: batch of %zu rolled back, it will be redelivered", n);
                return;
        }
        if (rc == PL_DB_DOWN)
                db_lost(c, ctx, err);
        else
                batch_failed(c, t, n, err);
}

/* While the database is down: reconnect when its backoff has passed. */
static void db_reconnect(struct consumer *c)
{
        char err[512];
        if (!c->db_down || log_now_ms() < c->db_retry_at)
                return;
        if (store_connect(c->store, NULL, err, sizeof(err)) == STORE_OK) {
                log_info("consumer", "database reconnected");
                c->db_down = 0;
                c->db_backoff_ms = 100;
                return;
        }
        if (log_ratelimit_ok(&c->rl_db, 1, 10000))
                log_error("consumer", "database still unavailable: %s", err);
        c->db_backoff_ms = c->db_backoff_ms * 2 > c->cfg->db_retry_max_ms ? c->cfg->db_retry_max_ms
                                                                          : c->db_backoff_ms * 2;
        c->db_retry_at = log_now_ms() + c->db_backoff_ms;
}

/* Publish what committed batches wrote to the outbox: right after a batch
 * that wrote some, and every outbox.interval_ms for rows a crash left behind. */
static void relay(struct consumer *c, int force)
{
        int64_t now = log_now_ms();
        char err[512];
        if (c->db_down || !c->producer || !store_ok(c->store))
                return;
        if (!force && now - c->last_relay_ms < c->cfg->outbox_interval_ms)
                return;
        c->last_relay_ms = now;
        for (int round = 0; round < 100; round++) {
                int n = outbox_relay(c->store, c->producer, c->cfg->namespace, c->cfg->outbox_batch, err,
                                     sizeof(err));
                if (n < 0) {
                        log_warn("outbox", "relay: %s (rows stay unsent and are retried)", err);
                        return;
                }
                if (n)
                        log_debug("outbox", "published %d message(s)", n);
                if (n < c->cfg->outbox_batch)
                        return;
        }
}

static void log_stats(struct consumer *c)
{
        const struct pl_stats *s = pipeline_stats(c->pl);
        int64_t now = log_now_ms();
        double secs = (double)(now - c->last_stats_ms) / 1000.0;
        if (s->consumed != c->last_stats.consumed || s->retries != c->last_stats.retries)
                log_info("stats", "consumed %" PRIu64 " (%.0f/s), applied %" PRIu64 ", rejected %" PRIu64
                                  ", duplicates %" PRIu64 ", dead-lettered %" PRIu64 ", batches %" PRIu64
                                  ", retries %" PRIu64,
                         s->consumed, secs > 0 ? (double)(s->consumed - c->last_stats.consumed) / secs : 0.0,
                         s->applied, s->rejected, s->duplicates, s->dead_lettered, s->batches, s->retries);
        c->last_stats = *s;
        c->last_stats_ms = now;
}

/* How long the next poll may wait: until the first batch or reconnection is due. */
static int poll_timeout(const struct consumer *c, int64_t now)
{
        int64_t next = now + POLL_SLICE_MS;
        for (size_t t = 0; t < c->cfg->topic_cnt; t++) {
                int64_t due = batch_due_at(c, t);
                if (due < next)
                        next = due;
        }
        if (c->db_down && c->db_retry_at < next)
                next = c->db_retry_at;
        return next <= now ? 0 : (int)(next - now);
}

/* Between batches: the outbox relay, purge, the reaper and the stats line. */
static void housekeeping(struct consumer *c, int64_t now)
{
        if (c->db_down)
                return;
        relay(c, pipeline_take_outbox(c->pl) > 0);
        retention_tick(c->store, c->cfg, log_now_ms()); /* every purge.interval_ms */
        external_reap_tick(c->pl, now);
}

/* Leave the group with everything committed visible to lag monitoring. */
static void leave(struct consumer *c)
{
        pipeline_stop(c->pl);
        purge(c, NULL);
        rd_kafka_resp_err_t e = rd_kafka_commit(c->rk, NULL, 0);
        if (e && e != RD_KAFKA_RESP_ERR__NO_OFFSET)
                log_warn("consumer", "final offset commit: %s", rd_kafka_err2str(e));
        e = rd_kafka_consumer_close(c->rk);
        if (e)
                log_warn("consumer", "leaving the group: %s", rd_kafka_err2str(e));
}

int consumer_run(struct consumer *c, volatile sig_atomic_t *stop, char *err, size_t errsz)
{
        c->last_stats_ms = log_now_ms();
        while (!*stop && !c->fatal) {
                db_reconnect(c);
                apply_pauses(c);
                poll_once(c, poll_timeout(c, log_now_ms()));
                int64_t now = log_now_ms();
                /* Each due topic gets one batch per turn: a topic that keeps
                 * failing waits in its backoff while the others go on. */
                for (size_t t = 0; t < c->cfg->topic_cnt && !*stop && !c->fatal; t++)
                        if (batch_due_at(c, t) <= now)
                                run_batch(c, t, stop);
                housekeeping(c, now);
                if (now - c->last_stats_ms >= STATS_INTERVAL_MS)
                        log_stats(c);
        }
        log_stats(c);
        leave(c);
        if (c->fatal) {
                snprintf(err, errsz, "%s", c->fatal_msg);
                return -1;
        }
        return 0;
}
