/* dlq: the dead-letter producer — a message is handed back only once the broker acknowledged it. */
#include "dlq.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "log.h"

#define DLQ_TIMEOUT_MS 30000

struct dlq {
        rd_kafka_t *rk;
        /* Delivery results of the call in progress. A report for an older
         * call (after a timeout) carries an older generation and is ignored. */
        uint32_t gen;
        rd_kafka_resp_err_t *results;
        size_t pending;
};

static const char *const consumer_props[] = {
        "group.id", "group.instance.id", "auto.offset.reset", "enable.auto.commit",
        "auto.commit.interval.ms", "enable.auto.offset.store", "session.timeout.ms",
        "max.poll.interval.ms", "heartbeat.interval.ms", "partition.assignment.strategy",
        "fetch.min.bytes", "fetch.max.bytes", "fetch.wait.max.ms", "max.partition.fetch.bytes",
        "fetch.message.max.bytes", "queued.min.messages", "queued.max.messages.kbytes",
        "enable.partition.eof", "check.crcs", "isolation.level", "group.protocol.type",
        "coordinator.query.interval.ms", "allow.auto.create.topics", "auto.commit.enable",
        "offset.store.method", "consume.callback.max.messages", "client.rack",
};

int dlq_is_consumer_property(const char *name)
{
        for (size_t i = 0; i < sizeof(consumer_props) / sizeof(*consumer_props); i++)
                if (!strcmp(name, consumer_props[i]))
                        return 1;
        return 0;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
        struct dlq *q = opaque;
        uintptr_t tag = (uintptr_t)m->_private;
        uint32_t gen = (uint32_t)(tag >> 32);
        size_t idx = (size_t)(tag & 0xffffffffu);
        (void)rk;
        if (gen != q->gen || !q->results)
                return;
        q->results[idx] = m->err;
        q->pending--;
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
        (void)rk;
        int l = level <= 3 ? LOG_ERROR : level == 4 ? LOG_WARN : level <= 6 ? LOG_INFO : LOG_DEBUG;
        LOG(l, "kafka:dlq", "%s: %s", fac, buf);
}

struct dlq *dlq_new(const struct config *cfg, char *err, size_t errsz)
{
        struct dlq *q = calloc(1, sizeof(*q));
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        if (!q) {
                rd_kafka_conf_destroy(conf);
                snprintf(err, errsz, "out of memory");
                return NULL;
        }
        for (size_t i = 0; i < cfg->kafka_cnt; i++) {
                if (dlq_is_consumer_property(cfg->kafka[i].name))
                        continue;
                if (rd_kafka_conf_set(conf, cfg->kafka[i].name, cfg->kafka[i].value, err, errsz) !=
                    RD_KAFKA_CONF_OK)
                        goto error;
        }
        /* Idempotent: a retried produce never duplicates inside the broker. */
        if (rd_kafka_conf_set(conf, "enable.idempotence", "true", err, errsz) ||
            rd_kafka_conf_set(conf, "acks", "all", err, errsz) ||
            rd_kafka_conf_set(conf, "linger.ms", "5", err, errsz) ||
            rd_kafka_conf_set(conf, "message.timeout.ms", "25000", err, errsz))
                goto error;
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_conf_set_log_cb(conf, log_cb);
        rd_kafka_conf_set_opaque(conf, q);
        q->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, errsz);
        if (!q->rk)
                goto error;
        /* conf is now owned by rk */
        return q;
error:
        rd_kafka_conf_destroy(conf);
        free(q);
        return NULL;
}

void dlq_free(struct dlq *q)
{
        if (!q)
                return;
        if (q->rk) {
                rd_kafka_flush(q->rk, 5000);
                q->gen++;
                rd_kafka_destroy(q->rk);
        }
        free(q->results);
        free(q);
}

static int add_header(rd_kafka_headers_t *h, const char *name, const char *value)
{
        return rd_kafka_header_add(h, name, -1, value, -1) ? -1 : 0;
}

int dlq_send(void *opaque, const char *dlq_topic, const char *ns, struct pl_msg *const *msgs,
             size_t n, char *err, size_t errsz)
{
        struct dlq *q = opaque;
        size_t produced = 0;
        int64_t deadline;

        free(q->results);
        q->results = calloc(n, sizeof(*q->results));
        if (!q->results) {
                snprintf(err, errsz, "out of memory");
                return -1;
        }
        q->gen++;
        q->pending = 0;
        for (size_t i = 0; i < n; i++) {
                const struct pl_msg *m = msgs[i];
                rd_kafka_headers_t *h = rd_kafka_headers_new(m->header_cnt + 8);
                char part[16], off[24], ts[24];
                snprintf(part, sizeof(part), "%" PRId32, m->partition);
                snprintf(off, sizeof(off), "%" PRId64, m->offset);
                snprintf(ts, sizeof(ts), "%" PRId64, m->timestamp_ms);
                for (size_t k = 0; k < m->header_cnt; k++)
                        rd_kafka_header_add(h, m->headers[k].name, -1, m->headers[k].value,
                                            m->headers[k].value ? (ssize_t)m->headers[k].value_len : 0);
                if (add_header(h, "dedupd.reason", m->dlq_reason ? m->dlq_reason : "unknown") ||
                    add_header(h, "dedupd.origin.topic", m->topic) ||
                    add_header(h, "dedupd.origin.partition", part) ||
                    add_header(h, "dedupd.origin.offset", off) ||
                    add_header(h, "dedupd.origin.timestamp", ts) ||
                    add_header(h, "dedupd.namespace", ns) ||
                    (m->idem_key && add_header(h, "dedupd.key", m->idem_key))) {
                        rd_kafka_headers_destroy(h);
                        snprintf(err, errsz, "cannot build dead-letter headers");
                        break;
                }
                q->results[i] = RD_KAFKA_RESP_ERR__IN_PROGRESS;
                uintptr_t tag = ((uintptr_t)q->gen << 32) | (uintptr_t)i;
                rd_kafka_resp_err_t e = rd_kafka_producev(
                        q->rk, RD_KAFKA_V_TOPIC(dlq_topic), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                        RD_KAFKA_V_KEY(m->key, m->key ? m->key_len : 0),
                        RD_KAFKA_V_VALUE((void *)m->value, m->value ? m->value_len : 0),
                        RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_OPAQUE((void *)tag), RD_KAFKA_V_END);
                if (e) {
                        rd_kafka_headers_destroy(h); /* not taken on failure */
                        q->results[i] = e;
                        snprintf(err, errsz, "dead-letter produce to %s failed: %s", dlq_topic,
                                 rd_kafka_err2str(e));
                        break;
                }
                q->pending++;
                produced++;
        }
        deadline = log_now_ms() + DLQ_TIMEOUT_MS;
        while (q->pending > 0 && log_now_ms() < deadline)
                rd_kafka_poll(q->rk, 100);
        if (q->pending > 0) {
                snprintf(err, errsz, "dead-letter write to %s not acknowledged within %d ms", dlq_topic,
                         DLQ_TIMEOUT_MS);
                q->gen++; /* late reports of this call are ignored */
                return -1;
        }
        if (produced < n)
                return -1;
        for (size_t i = 0; i < n; i++) {
                if (q->results[i]) {
                        snprintf(err, errsz, "dead-letter write to %s failed: %s", dlq_topic,
                                 rd_kafka_err2str(q->results[i]));
                        return -1;
                }
        }
        return 0;
}
