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

struct tbuf {
        struct pl_msg **msgs;
        size_t cnt, cap;
        int64_t first_ms; /* when the oldest buffered message arrived */
};

struct consumer {
        rd_kafka_t *rk;
        const struct config *cfg;
        struct store *store;
        struct pipeline *pl;
        struct producer *producer;
        int64_t last_relay_ms;
        struct tbuf *bufs; /* one per topic */
        int paused;        /* partitions paused while a batch cannot commit */
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

/* Drop buffered messages of revoked partitions: they were never committed
 * and will be delivered to the partition's next owner. */
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
        }
        if (dropped)
                log_info("consumer", "dropped %zu uncommitted buffered messages of revoked partitions",
                         dropped);
}

static void set_pause(struct consumer *c, int pause)
{
        rd_kafka_topic_partition_list_t *parts = NULL;
        if (c->paused == pause)
                return;
        if (rd_kafka_assignment(c->rk, &parts) == RD_KAFKA_RESP_ERR_NO_ERROR && parts) {
                if (pause)
                        rd_kafka_pause_partitions(c->rk, parts);
                else
                        rd_kafka_resume_partitions(c->rk, parts);
                rd_kafka_topic_partition_list_destroy(parts);
        }
        c->paused = pause;
        log_info("consumer", "%s fetching", pause ? "paused" : "resumed");
}

static void assign(struct consumer *c, rd_kafka_topic_partition_list_t *parts)
{
        char err[512];
        /* The offsets table moves in the same transaction as the effects:
         * where it has a row, it is authoritative. */
        for (size_t t = 0; t < c->cfg->topic_cnt; t++) {
                const char *topic = c->cfg->topics[t].name;
                int32_t pids[parts->cnt ? parts->cnt : 1];
                int64_t offs[parts->cnt ? parts->cnt : 1];
                int idx[parts->cnt ? parts->cnt : 1];
                size_t n = 0;
                for (int i = 0; i < parts->cnt; i++) {
                        if (strcmp(parts->elems[i].topic, topic))
                                continue;
                        idx[n] = i;
                        pids[n++] = parts->elems[i].partition;
                }
                if (!n)
                        continue;
                if (!store_ok(c->store))
                        store_connect(c->store, NULL, err, sizeof(err));
                if (store_offsets_get(c->store, c->cfg->namespace, topic, n, pids, offs, err,
                                      sizeof(err))) {
                        /* Kafka's committed offset is never ahead of the table,
                         * so falling back to it can only re-read (absorbed). */
                        log_warn("consumer", "cannot read start offsets from the database (%s); "
                                             "starting %s from Kafka's committed offsets",
                                 err, topic);
                        continue;
                }
                for (size_t k = 0; k < n; k++) {
                        rd_kafka_topic_partition_t *p = &parts->elems[idx[k]];
                        p->offset = offs[k] >= 0 ? offs[k] : RD_KAFKA_OFFSET_INVALID;
                        if (offs[k] >= 0)
                                log_info("consumer", "assigned %s/%d: starting at offset %" PRId64
                                                     " (database)",
                                         topic, (int)p->partition, offs[k]);
                        else
                                log_info("consumer", "assigned %s/%d: no database position, "
                                                     "starting at the committed offset",
                                         topic, (int)p->partition);
                }
        }
        rd_kafka_assign(c->rk, parts);
        if (c->paused)
                rd_kafka_pause_partitions(c->rk, parts);
        /* A crash between COMMIT and the Kafka commit leaves Kafka behind the
         * table; if nothing more arrives on that partition nothing would ever
         * move it, and lag monitoring would show a lag that is not there.
         * Hand Kafka the database's position now. */
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

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
        struct consumer *c = opaque;
        switch (err) {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
                assign(c, parts);
                break;
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
                log_info("consumer", "%d partitions revoked", parts->cnt);
                purge(c, parts);
                for (int i = 0; i < parts->cnt; i++) {
                        int t = topic_index(c, parts->elems[i].topic);
                        if (t >= 0)
                                pipeline_forget(c->pl, (size_t)t, parts->elems[i].partition);
                }
                rd_kafka_assign(rk, NULL);
                break;
        default:
                log_error("consumer", "rebalance error: %s", rd_kafka_err2str(err));
                purge(c, NULL);
                rd_kafka_assign(rk, NULL);
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
        c->bufs = calloc(cfg->topic_cnt, sizeof(*c->bufs));
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
        if (c->rk)
                rd_kafka_destroy(c->rk);
        free(c);
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
                log_error("consumer", "cannot buffer a message of %s (out of memory or unknown topic)",
                          rd_kafka_topic_name(rkm->rkt));
                rd_kafka_message_destroy(rkm);
                return;
        }
        struct tbuf *b = &c->bufs[t];
        if (b->cnt == b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 64;
                struct pl_msg **nm = realloc(b->msgs, cap * sizeof(*nm));
                if (!nm) {
                        msg_free(m);
                        return;
                }
                b->msgs = nm;
                b->cap = cap;
        }
        if (b->cnt == 0)
                b->first_ms = log_now_ms();
        b->msgs[b->cnt++] = m;
}

/* Wait ms while staying in the group: poll in slices, buffer what comes. */
static void wait_serving(struct consumer *c, int ms, volatile sig_atomic_t *stop)
{
        int64_t until = log_now_ms() + ms;
        while (!*stop && log_now_ms() < until) {
                int64_t left = until - log_now_ms();
                poll_once(c, left < POLL_SLICE_MS ? (int)left : POLL_SLICE_MS);
        }
}

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

/* Process up to max messages of a topic's buffer until committed or stopped. */
static void process(struct consumer *c, size_t t, volatile sig_atomic_t *stop)
{
        const struct topic_conf *tc = &c->cfg->topics[t];
        struct tbuf *b = &c->bufs[t];
        int backoff = tc->retry_backoff_ms;
        char err[1024], ctx[160];

        snprintf(ctx, sizeof(ctx), "topic:%s", tc->name);
        while (b->cnt > 0 && !c->fatal) {
                size_t n = b->cnt < (size_t)tc->batch_max_messages ? b->cnt : (size_t)tc->batch_max_messages;
                struct pl_commit commits[n + 1];
                size_t nc = 0;

                err[0] = '\0';
                n = pipeline_guard(c->pl, t, b->msgs, n);
                fault_point("after_poll");
                enum pl_rc rc = pipeline_process(c->pl, t, b->msgs, n, commits, &nc, err, sizeof(err));
                if (rc == PL_OK) {
                        acknowledge(c, commits, nc);
                        fault_point("after_ack");
                        for (size_t i = 0; i < n; i++)
                                msg_free(b->msgs[i]);
                        memmove(b->msgs, b->msgs + n, (b->cnt - n) * sizeof(*b->msgs));
                        b->cnt -= n;
                        b->first_ms = log_now_ms();
                        set_pause(c, 0);
                        backoff = tc->retry_backoff_ms;
                        if (b->cnt < (size_t)tc->batch_max_messages)
                                return;
                        continue;
                }
                /* A partial batch (external mode): what it committed is acknowledged now. */
                if (nc > 0)
                        acknowledge(c, commits, nc);
                if (*stop) {
                        log_info(ctx, "shutting down: batch of %zu rolled back, it will be redelivered", n);
                        return;
                }
                if (rc == PL_DB_DOWN) {
                        if (log_ratelimit_ok(&c->rl_db, 1, 10000))
                                log_error(ctx, "database unavailable (%s); pausing, retrying every %d ms at most",
                                          err, c->cfg->db_retry_max_ms);
                        set_pause(c, 1);
                        wait_serving(c, backoff, stop);
                        if (!*stop && store_connect(c->store, NULL, err, sizeof(err)) == STORE_OK)
                                log_info(ctx, "database reconnected");
                        backoff = backoff * 2 > c->cfg->db_retry_max_ms ? c->cfg->db_retry_max_ms : backoff * 2;
                        if (backoff < 10)
                                backoff = 10;
                } else {
                        log_warn(ctx, "batch of %zu not finished: %s; retrying in %d ms", n, err, backoff);
                        set_pause(c, 1);
                        wait_serving(c, backoff, stop);
                        backoff = backoff * 2 > tc->retry_backoff_max_ms ? tc->retry_backoff_max_ms
                                                                        : backoff * 2;
                        if (backoff < 1)
                                backoff = 1;
                }
        }
}

/* Publish what committed batches wrote to the outbox: right after a batch
 * that wrote some, and every outbox.interval_ms for rows a crash left behind. */
static void relay(struct consumer *c, int force)
{
        int64_t now = log_now_ms();
        char err[512];
        if (c->paused || !c->producer || !store_ok(c->store))
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

int consumer_run(struct consumer *c, volatile sig_atomic_t *stop, char *err, size_t errsz)
{
        c->last_stats_ms = log_now_ms();
        while (!*stop && !c->fatal) {
                int64_t now = log_now_ms();
                int timeout = POLL_SLICE_MS;
                for (size_t t = 0; t < c->cfg->topic_cnt; t++) {
                        const struct tbuf *b = &c->bufs[t];
                        if (b->cnt) {
                                int64_t left = b->first_ms + c->cfg->topics[t].batch_max_wait_ms - now;
                                if (left < timeout)
                                        timeout = left < 0 ? 0 : (int)left;
                        }
                }
                poll_once(c, timeout);
                now = log_now_ms();
                for (size_t t = 0; t < c->cfg->topic_cnt && !*stop; t++) {
                        const struct tbuf *b = &c->bufs[t];
                        if (b->cnt && (b->cnt >= (size_t)c->cfg->topics[t].batch_max_messages ||
                                       now - b->first_ms >= c->cfg->topics[t].batch_max_wait_ms))
                                process(c, t, stop);
                }
                relay(c, pipeline_take_outbox(c->pl) > 0);
                retention_tick(c->store, c->cfg, log_now_ms()); /* every purge.interval_ms */
                external_reap_tick(c->pl, now);
                if (now - c->last_stats_ms >= STATS_INTERVAL_MS)
                        log_stats(c);
        }
        log_stats(c);
        purge(c, NULL);
        /* Everything committed to the database is acknowledged: make it
         * visible to lag monitoring before leaving the group. */
        rd_kafka_resp_err_t e = rd_kafka_commit(c->rk, NULL, 0);
        if (e && e != RD_KAFKA_RESP_ERR__NO_OFFSET)
                log_warn("consumer", "final offset commit: %s", rd_kafka_err2str(e));
        e = rd_kafka_consumer_close(c->rk);
        if (e)
                log_warn("consumer", "leaving the group: %s", rd_kafka_err2str(e));
        if (c->fatal) {
                snprintf(err, errsz, "%s", c->fatal_msg);
                return -1;
        }
        return 0;
}
