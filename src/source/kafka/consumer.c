/* consumer: the Kafka source — a consumer in the group, its rebalances, messages handed over, positions committed after COMMIT. */
#include "source/kafka/consumer.h"

#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "base/log.h"
#include "source/kafka/client.h"
#include "source/kafka/part_queues.h"
#include "source/kafka/positions.h"
#include "source/kafka/stats.h"

struct kafka_source {
        struct source base; /* first: a struct source * is a struct kafka_source * */
        rd_kafka_t *rk;
        const struct config *cfg;
        struct source_events ev;
        int fatal;
        char fatal_msg[1024];
        struct log_ratelimit rl;
        int joined;          /* the group has handed this member an assignment (empty or not) */
        int64_t deadline_ms; /* startup: joined by then, or fail; 0: no deadline */
        int startup_timeout_ms;
        char last_error[512];                       /* librdkafka's last error, for the startup failure */
        struct kafka_positions *positions;          /* handed over, acknowledged, skipped */
        int brokers_down;                           /* ALL_BROKERS_DOWN, and no sign of one since */
        char brokers_why[512];                      /* what librdkafka said then */
        int64_t recommit_at_ms;                     /* a refused offset commit is sent again then; 0: none due */
        rd_kafka_topic_partition_list_t *to_commit; /* acknowledged, not yet committed to Kafka; NULL: none */
        int64_t committed_at_ms;                    /* when the last commit was sent */
        struct kafka_part_queues *queues;           /* each partition's messages, held while paused */
};

static struct kafka_source *of(struct source *src) { return (struct kafka_source *)src; }

static int topic_index(const struct config *cfg, const char *name)
{
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                if (!strcmp(cfg->topics[i].name, name))
                        return (int)i;
        return -1;
}

/* ---- messages ---------------------------------------------------------------- */

static void msg_release(struct source *src, struct pl_msg *m)
{
        (void)src;
        if (!m)
                return;
        free(m->headers);
        rd_kafka_message_destroy(m->source);
        free(m);
}

static void wrap_headers(rd_kafka_message_t *rkm, struct pl_msg *m)
{
        rd_kafka_headers_t *hdrs = NULL;
        if (rd_kafka_message_headers(rkm, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR)
                return;
        size_t cnt = rd_kafka_header_cnt(hdrs);
        m->headers = xcalloc(cnt ? cnt : 1, sizeof(*m->headers));
        for (size_t i = 0; i < cnt; i++) {
                const char *name;
                const void *val;
                size_t size;
                if (rd_kafka_header_get_all(hdrs, i, &name, &val, &size))
                        break;
                m->headers[m->header_cnt++] = (struct dedupd_header){name, val, size};
        }
}

static struct pl_msg *msg_wrap(rd_kafka_message_t *rkm, size_t topic_idx)
{
        struct pl_msg *m = xcalloc(1, sizeof(*m));
        rd_kafka_timestamp_type_t tstype;
        m->source = rkm;
        m->topic_idx = topic_idx;
        m->topic = rd_kafka_topic_name(rkm->rkt);
        m->partition = rkm->partition;
        m->offset = rkm->offset;
        m->timestamp_ms = rd_kafka_message_timestamp(rkm, &tstype);
        m->key = rkm->key;
        m->key_len = rkm->key_len;
        m->value = rkm->payload;
        m->value_len = rkm->len;
        wrap_headers(rkm, m);
        return m;
}

/* An offset commit Kafka refused (a rebalance in progress, a coordinator
 * moving) leaves the offsets stored: they are committed again a second later,
 * so lag monitoring does not show a batch the database committed as behind
 * until its partition's next message (or for ever, at the end of a topic). */
#define RECOMMIT_MS 1000

/* Acknowledgements are committed to Kafka at most this often while
 * messages keep coming, and within COMMIT_IDLE_MS once nothing more is
 * queued (a lag monitor, or verify --expect-caught-up, sees a caught-up
 * group at once): the offsets table is the position, the group's committed
 * offset is for lag monitors and tools. One OffsetCommit per batch cost the
 * broker more CPU than the messages it served when batches are small. */
#define COMMIT_EVERY_MS 100
#define COMMIT_IDLE_MS 20

static void offset_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t e, rd_kafka_topic_partition_list_t *offsets,
                             void *opaque)
{
        struct kafka_source *k = opaque;
        int refused = e && e != RD_KAFKA_RESP_ERR__NO_OFFSET;
        (void)rk;
        for (int i = 0; !refused && offsets && i < offsets->cnt; i++)
                refused = offsets->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR;
        if (refused && !k->recommit_at_ms)
                k->recommit_at_ms = log_now_ms() + RECOMMIT_MS;
}

static void recommit_due(struct kafka_source *k)
{
        if (!k->recommit_at_ms || log_now_ms() < k->recommit_at_ms)
                return;
        k->recommit_at_ms = 0;
        rd_kafka_commit(k->rk, NULL, 1 /* async: the stored offsets of the current assignment */);
}

/* Store l's offsets and have them committed with the next commit. The last
 * word on a partition wins: a seek back replaces an acknowledgement not yet
 * sent. */
static void commit_later(struct kafka_source *k, const rd_kafka_topic_partition_list_t *l)
{
        rd_kafka_offsets_store(k->rk, (rd_kafka_topic_partition_list_t *)l);
        if (!k->to_commit)
                k->to_commit = rd_kafka_topic_partition_list_new(l->cnt);
        for (int i = 0; i < l->cnt; i++) {
                const rd_kafka_topic_partition_t *e = &l->elems[i];
                rd_kafka_topic_partition_t *p =
                        rd_kafka_topic_partition_list_find(k->to_commit, e->topic, e->partition);
                if (!p)
                        p = rd_kafka_topic_partition_list_add(k->to_commit, e->topic, e->partition);
                p->offset = e->offset;
        }
}

static void commit_forget(struct kafka_source *k)
{
        if (k->to_commit)
                rd_kafka_topic_partition_list_destroy(k->to_commit);
        k->to_commit = NULL;
}

/* Send what was acknowledged since the last commit (async: a refusal is
 * sent again by recommit_due). */
static void commit_flush(struct kafka_source *k)
{
        if (!k->to_commit)
                return;
        rd_kafka_commit(k->rk, k->to_commit, 1 /* async */);
        commit_forget(k);
        k->committed_at_ms = log_now_ms();
}

/* idle: nothing more is queued. */
static void commit_due(struct kafka_source *k, int idle)
{
        if (k->to_commit && log_now_ms() - k->committed_at_ms >= (idle ? COMMIT_IDLE_MS : COMMIT_EVERY_MS))
                commit_flush(k);
}

/* What the consumer's queue has (a rebalance runs in there), else the next
 * message of a partition not held. */
static rd_kafka_message_t *next_message(struct kafka_source *k)
{
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(k->rk, 0);
        return rkm ? rkm : kafka_part_queues_next(k->queues);
}

/* The next message, waiting up to timeout_ms for one; while nothing is
 * queued, what was acknowledged is committed. */
static rd_kafka_message_t *wait_message(struct kafka_source *k, int timeout_ms)
{
        int64_t until = log_now_ms() + timeout_ms;
        rd_kafka_message_t *rkm;
        for (;;) {
                if ((rkm = next_message(k)))
                        return rkm;
                /* Nothing: forget the wake-ups so far and look once more
                 * (what came between is then seen, or wakes the wait). */
                kafka_part_queues_clear(k->queues);
                if ((rkm = next_message(k)))
                        return rkm;
                commit_due(k, 1);
                int64_t left = until - log_now_ms();
                int64_t wait = k->to_commit && left > COMMIT_IDLE_MS ? COMMIT_IDLE_MS : left;
                if (left <= 0 || (!kafka_part_queues_wait(k->queues, (int)wait) && wait == left))
                        return NULL;
        }
}

static struct pl_msg *poll_one(struct source *src, int timeout_ms)
{
        struct kafka_source *k = of(src);
        recommit_due(k);
        commit_due(k, 0);
        rd_kafka_message_t *rkm = wait_message(k, timeout_ms);
        if (!rkm)
                return NULL;
        if (rkm->err) {
                if (rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        snprintf(k->last_error, sizeof(k->last_error), "%s", rd_kafka_message_errstr(rkm));
                        log_limited(&k->rl, 3, 10000, LOG_WARN, "kafka", "consumer: %s", k->last_error);
                }
                rd_kafka_message_destroy(rkm);
                return NULL;
        }
        int t = topic_index(k->cfg, rd_kafka_topic_name(rkm->rkt));
        if (t < 0) {
                /* Not handed over, so never acknowledged. */
                log_error("kafka", "a message of %s, a topic this config does not consume",
                          rd_kafka_topic_name(rkm->rkt));
                rd_kafka_message_destroy(rkm);
                return NULL;
        }
        kafka_positions_delivered(k->positions, (size_t)t, rkm->partition, rkm->offset);
        k->brokers_down = 0; /* a fetch was answered */
        return msg_wrap(rkm, (size_t)t);
}

/* ---- positions ---------------------------------------------------------------- */

static rd_kafka_topic_partition_list_t *list_of(const struct config *cfg, const struct pl_part *parts, size_t n)
{
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
        for (size_t i = 0; i < n; i++)
                rd_kafka_topic_partition_list_add(l, cfg->topics[parts[i].topic_idx].name, parts[i].partition);
        return l;
}

static void ack(struct source *src, const struct pl_commit *commits, size_t n)
{
        struct kafka_source *k = of(src);
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
        for (size_t i = 0; i < n; i++) {
                int t = topic_index(k->cfg, commits[i].topic);
                rd_kafka_topic_partition_list_add(l, commits[i].topic, commits[i].partition)->offset =
                        commits[i].next_offset;
                if (t >= 0)
                        kafka_positions_acked(k->positions, (size_t)t, commits[i].partition, commits[i].next_offset);
        }
        /* A partition revoked meanwhile is refused here; its next owner starts
         * from the database anyway. */
        commit_later(k, l);
        rd_kafka_topic_partition_list_destroy(l);
        commit_due(k, 0);
}

/* A paused partition is held, not paused in librdkafka: that would drop
 * what was fetched of it, to be fetched again on resume (part_queues.h). */
static void pause_parts(struct source *src, const struct pl_part *parts, size_t n, int pause)
{
        struct kafka_source *k = of(src);
        for (size_t i = 0; i < n; i++)
                kafka_part_queues_hold(k->queues, k->cfg->topics[parts[i].topic_idx].name, parts[i].partition, pause);
}

static size_t skipped(struct source *src, struct pl_skip *out, size_t max)
{
        struct kafka_source *k = of(src);
        return kafka_positions_skipped(k->positions, k->rk, k->cfg, out, max);
}

/* Where a partition is when the runner asks for the broker's own position
 * (SOURCE_START_BROKER): the group's committed offset, or where
 * auto.offset.reset sends a partition without one. -1 when the group
 * coordinator did not answer. */
#define SEEK_TIMEOUT_MS 5000
static int broker_positions(struct kafka_source *k, rd_kafka_topic_partition_list_t *l, char *err, size_t errsz)
{
        rd_kafka_resp_err_t e = rd_kafka_committed(k->rk, l, SEEK_TIMEOUT_MS);
        const char *reset =
                kafka_user_set(k->cfg, "auto.offset.reset") ? kafka_property(k->cfg, "auto.offset.reset") : "earliest";
        int latest = !strcmp(reset, "latest") || !strcmp(reset, "largest") || !strcmp(reset, "end");
        if (e) {
                snprintf(err, errsz, "reading the group's committed offsets: %s", rd_kafka_err2str(e));
                return -1;
        }
        for (int i = 0; i < l->cnt; i++)
                if (l->elems[i].offset < 0)
                        l->elems[i].offset = latest ? RD_KAFKA_OFFSET_END : RD_KAFKA_OFFSET_BEGINNING;
        return 0;
}

static void commit_known_positions(struct kafka_source *k, const rd_kafka_topic_partition_list_t *parts);

/* The runner re-positions partitions it owns (the database it reconnected to
 * may be a promoted replica that lost the last commits): fetch from there,
 * and tell Kafka too, so lag monitoring and tooling see the database's
 * position. librdkafka drops what it fetched from the old position. */
static int seek_parts(struct source *src, const struct pl_part *parts, const int64_t *start, size_t n, char *err,
                      size_t errsz)
{
        struct kafka_source *k = of(src);
        rd_kafka_topic_partition_list_t *at = list_of(k->cfg, parts, n), *broker = list_of(k->cfg, parts, 0);
        int rc = 0;
        for (size_t i = 0; i < n; i++) {
                at->elems[i].offset = start[i];
                if (start[i] < 0)
                        rd_kafka_topic_partition_list_add(broker, at->elems[i].topic, at->elems[i].partition);
        }
        if (broker->cnt && (rc = broker_positions(k, broker, err, errsz)) == 0)
                for (int i = 0; i < broker->cnt; i++)
                        rd_kafka_topic_partition_list_find(at, broker->elems[i].topic, broker->elems[i].partition)
                                ->offset = broker->elems[i].offset;
        rd_kafka_error_t *e = rc ? NULL : rd_kafka_seek_partitions(k->rk, at, SEEK_TIMEOUT_MS);
        if (e) {
                snprintf(err, errsz, "seek: %s", rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
                rc = -1;
        }
        for (int i = 0; !rc && i < at->cnt; i++)
                if (at->elems[i].err) {
                        snprintf(err, errsz, "seek %s/%d: %s", at->elems[i].topic, (int)at->elems[i].partition,
                                 rd_kafka_err2str(at->elems[i].err));
                        rc = -1;
                }
        if (!rc) {
                for (int i = 0; i < at->cnt; i++)
                        kafka_positions_moved(k->positions, (size_t)topic_index(k->cfg, at->elems[i].topic),
                                              at->elems[i].partition, at->elems[i].offset);
                commit_known_positions(k, at);
        }
        rd_kafka_topic_partition_list_destroy(at);
        rd_kafka_topic_partition_list_destroy(broker);
        return rc;
}

/* ---- rebalances ----------------------------------------------------------------- */

/* A crash between COMMIT and the Kafka commit leaves Kafka behind the table;
 * if nothing more arrives on that partition nothing would ever move it, and
 * lag monitoring would show a lag that is not there. Hand Kafka the
 * database's position now. */
static void commit_known_positions(struct kafka_source *k, const rd_kafka_topic_partition_list_t *parts)
{
        rd_kafka_topic_partition_list_t *known = rd_kafka_topic_partition_list_new(parts->cnt);
        for (int i = 0; i < parts->cnt; i++)
                if (parts->elems[i].offset >= 0)
                        rd_kafka_topic_partition_list_add(known, parts->elems[i].topic, parts->elems[i].partition)
                                ->offset = parts->elems[i].offset;
        if (known->cnt) {
                commit_later(k, known);
                commit_flush(k);
        }
        rd_kafka_topic_partition_list_destroy(known);
}

/* The partitions of a rebalance list that this config consumes. */
static size_t parts_of(const struct kafka_source *k, const rd_kafka_topic_partition_list_t *l, struct pl_part *out,
                       int *elem)
{
        size_t n = 0;
        for (int i = 0; i < l->cnt; i++) {
                int t = topic_index(k->cfg, l->elems[i].topic);
                if (t < 0)
                        continue;
                elem[n] = i;
                out[n++] = (struct pl_part){(size_t)t, l->elems[i].partition};
        }
        return n;
}

static void assign(struct kafka_source *k, rd_kafka_topic_partition_list_t *l)
{
        struct pl_part parts[l->cnt ? l->cnt : 1];
        int64_t start[l->cnt ? l->cnt : 1];
        int elem[l->cnt ? l->cnt : 1];
        size_t n = parts_of(k, l, parts, elem);
        for (size_t i = 0; i < n; i++)
                start[i] = -1;
        k->ev.assigned(k->ev.opaque, parts, n, start);
        /* Where the runner knows a position (the database's), it is
         * authoritative. One it will seek later (SOURCE_START_LATER) starts
         * paused at the end: not at the committed offset, whose lookup could
         * answer after that seek and undo it. */
        for (size_t i = 0; i < n; i++)
                l->elems[elem[i]].offset = start[i] >= 0                    ? start[i]
                                           : start[i] == SOURCE_START_LATER ? RD_KAFKA_OFFSET_END
                                                                            : RD_KAFKA_OFFSET_INVALID;
        rd_kafka_assign(k->rk, l);
        kafka_part_queues_assigned(k->queues, k->cfg, l);
        kafka_positions_assigned(k->positions, k->cfg, l);
        k->ev.settled(k->ev.opaque);
        commit_known_positions(k, l);
}

static void revoke(struct kafka_source *k, const rd_kafka_topic_partition_list_t *l)
{
        if (l) {
                struct pl_part parts[l->cnt ? l->cnt : 1];
                int elem[l->cnt ? l->cnt : 1];
                size_t n = parts_of(k, l, parts, elem);
                k->ev.revoked(k->ev.opaque, parts, n);
        } else {
                k->ev.revoked(k->ev.opaque, NULL, 0);
        }
        commit_flush(k);
        kafka_positions_revoked(k->positions, k->cfg, NULL);
        kafka_part_queues_revoked(k->queues);
        rd_kafka_assign(k->rk, NULL);
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts, void *opaque)
{
        struct kafka_source *k = opaque;
        (void)rk;
        switch (err) {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
                k->joined = 1;
                k->brokers_down = 0;
                assign(k, parts);
                break;
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS: revoke(k, parts); break;
        default:
                log_error("kafka", "rebalance error: %s", rd_kafka_err2str(err));
                revoke(k, NULL);
                break;
        }
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
        struct kafka_source *k = opaque;
        if (err == RD_KAFKA_RESP_ERR__FATAL) {
                char buf[256];
                rd_kafka_fatal_error(rk, buf, sizeof(buf));
                snprintf(k->fatal_msg, sizeof(k->fatal_msg), "fatal Kafka error: %s", buf);
                k->fatal = 1;
                return;
        }
        if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) {
                k->brokers_down = 1;
                snprintf(k->brokers_why, sizeof(k->brokers_why), "%s", reason);
        }
        /* "1/1 brokers are down" says less than the refusal before it. */
        if (err != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || !k->last_error[0])
                snprintf(k->last_error, sizeof(k->last_error), "%s", reason);
        /* "1/1 brokers are down" names none: say which. */
        if (kafka_err_unreachable((rd_kafka_resp_err_t)err))
                log_limited(&k->rl, 3, 10000, LOG_WARN, "kafka", "%s: %s (bootstrap.servers %s)",
                            rd_kafka_err2name((rd_kafka_resp_err_t)err), reason, kafka_bootstrap(k->cfg));
        else
                log_limited(&k->rl, 3, 10000, LOG_WARN, "kafka", "%s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)err),
                            reason);
}

/* librdkafka says when every broker is down, never when one is back: its
 * statistics (every statistics.interval.ms, on whenever http.listen is
 * set) name each broker's state. A message or an assignment says so too. */
static int stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
        struct kafka_source *k = opaque;
        if (k->brokers_down && kafka_stats_brokers_up(json, len) > 0)
                k->brokers_down = 0;
        return kafka_stats_cb(rk, json, len, opaque);
}

static int connected(struct source *src, char *why, size_t whysz)
{
        struct kafka_source *k = of(src);
        if (k->brokers_down)
                snprintf(why, whysz, "Kafka: no broker reachable (bootstrap.servers %s): %s", kafka_bootstrap(k->cfg),
                         k->brokers_why);
        return !k->brokers_down;
}

/* ---- life ------------------------------------------------------------------------ */

void kafka_source_set_startup_deadline(struct source *src, int64_t deadline_ms, int timeout_ms)
{
        of(src)->deadline_ms = deadline_ms;
        of(src)->startup_timeout_ms = timeout_ms;
}

/* Startup ends with the first assignment: until then the member is not in
 * its group and consumes nothing, and past the deadline it says why. */
static void check_startup(struct kafka_source *k)
{
        if (k->joined || k->fatal || !k->deadline_ms || log_now_ms() < k->deadline_ms)
                return;
        snprintf(k->fatal_msg, sizeof(k->fatal_msg),
                 "startup: no assignment from consumer group %s within %d ms (startup_timeout_ms) from the Kafka "
                 "broker(s) at %s (bootstrap.servers): %s%s",
                 kafka_property(k->cfg, "group.id"), k->startup_timeout_ms, kafka_bootstrap(k->cfg),
                 k->last_error[0] ? "last error: " : "",
                 k->last_error[0] ? k->last_error
                                  : "no error reported: the group's rebalance did not finish (it waits up to "
                                    "session.timeout.ms for a member that vanished; see group.instance.id)");
        k->fatal = 1;
}

static const char *failure(struct source *src)
{
        check_startup(of(src));
        return of(src)->fatal ? of(src)->fatal_msg : NULL;
}

/* Everything committed to the database is acknowledged: make it visible to
 * lag monitoring before leaving the group. A member that never joined has
 * nothing to commit and no group to leave: closing it would wait for the
 * join it is stuck in (destroy skips it). */
static void close_source(struct source *src)
{
        struct kafka_source *k = of(src);
        if (!k->joined)
                return;
        commit_forget(k); /* stored: the commit below sends them */
        rd_kafka_resp_err_t e = rd_kafka_commit(k->rk, NULL, 0);
        if (e && e != RD_KAFKA_RESP_ERR__NO_OFFSET)
                log_warn("kafka", "final offset commit: %s", rd_kafka_err2str(e));
        e = rd_kafka_consumer_close(k->rk);
        if (e)
                log_warn("kafka", "leaving the group: %s", rd_kafka_err2str(e));
}

static void destroy(struct source *src)
{
        struct kafka_source *k = of(src);
        kafka_part_queues_free(k->queues); /* its queue handles before their client */
        if (k->rk)
                rd_kafka_destroy_flags(k->rk, k->joined ? 0 : RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
        log_ratelimit_flush(&k->rl);
        commit_forget(k);
        kafka_positions_free(k->positions);
        free(k);
}

static const struct source_ops kafka_ops = {
        .poll = poll_one,
        .release = msg_release,
        .ack = ack,
        .pause = pause_parts,
        .seek = seek_parts,
        .failure = failure,
        .close = close_source,
        .destroy = destroy,
        .skipped = skipped,
        .connected = connected,
};

/* What librdkafka fetches ahead of each partition: with a queue per
 * partition (part_queues.h) queued.max.messages.kbytes bounds each one, and
 * its default, 64 MB, would let a held partition take that much. 1 MB is a
 * fetch's worth (max.partition.fetch.bytes) waiting while the last is read.
 * A kafka: map that sets queued.max.messages.kbytes decides. */
static int prefetch_default(const struct config *cfg, rd_kafka_conf_t *conf, char *err, size_t errsz)
{
        return !kafka_user_set(cfg, "queued.max.messages.kbytes") &&
               rd_kafka_conf_set(conf, "queued.max.messages.kbytes", "1024", err, errsz);
}

/* dedupd's own settings over the kafka: map: offsets are stored only after
 * the database COMMIT. */
static rd_kafka_conf_t *consumer_conf(const struct config *cfg, char *err, size_t errsz)
{
        rd_kafka_conf_t *conf = kafka_conf(cfg, KAFKA_ROLE_CONSUMER, NULL, err, errsz);
        if (!conf)
                return NULL;
        if (rd_kafka_conf_set(conf, "enable.auto.offset.store", "false", err, errsz) ||
            prefetch_default(cfg, conf, err, errsz) ||
            (!kafka_user_set(cfg, "auto.offset.reset") &&
             rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", err, errsz)) ||
            (!kafka_user_set(cfg, "enable.auto.commit") &&
             rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, errsz)) ||
            (*cfg->http_listen && !kafka_user_set(cfg, "statistics.interval.ms") &&
             rd_kafka_conf_set(conf, "statistics.interval.ms", KAFKA_STATS_INTERVAL_MS, err, errsz))) {
                rd_kafka_conf_destroy(conf);
                return NULL;
        }
        return conf;
}

static int subscribe(struct kafka_source *k, char *err, size_t errsz)
{
        rd_kafka_topic_partition_list_t *subs = rd_kafka_topic_partition_list_new((int)k->cfg->topic_cnt);
        for (size_t i = 0; i < k->cfg->topic_cnt; i++)
                rd_kafka_topic_partition_list_add(subs, k->cfg->topics[i].name, RD_KAFKA_PARTITION_UA);
        rd_kafka_resp_err_t e = rd_kafka_subscribe(k->rk, subs);
        rd_kafka_topic_partition_list_destroy(subs);
        if (e)
                snprintf(err, errsz, "subscribe failed: %s", rd_kafka_err2str(e));
        return e ? -1 : 0;
}

struct source *kafka_source_new(const struct config *cfg, struct source_events ev, char *err, size_t errsz)
{
        struct kafka_source *k = xcalloc(1, sizeof(*k));
        rd_kafka_conf_t *conf;

        k->base.ops = &kafka_ops;
        k->cfg = cfg;
        k->ev = ev;
        k->positions = kafka_positions_new();
        if (!(conf = consumer_conf(cfg, err, errsz)))
                goto error;
        rd_kafka_conf_set_opaque(conf, k);
        rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
        rd_kafka_conf_set_error_cb(conf, error_cb);
        rd_kafka_conf_set_offset_commit_cb(conf, offset_commit_cb);
        rd_kafka_conf_set_stats_cb(conf, stats_cb); /* consumer lag, for the metrics; brokers up */
        if (!(k->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, errsz))) {
                rd_kafka_conf_destroy(conf);
                goto error;
        }
        /* conf is now owned by rk */
        rd_kafka_poll_set_consumer(k->rk);
        if (!(k->queues = kafka_part_queues_new(k->rk, err, errsz)) || subscribe(k, err, errsz))
                goto error;
        return &k->base;
error:
        destroy(&k->base);
        return NULL;
}
