/* producer: the acknowledged producer — dead letters, replies and the outbox are handed back only once the broker has them. */
#include "producer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "log.h"

#define ACK_TIMEOUT_MS 30000

struct producer {
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

int producer_is_consumer_property(const char *name)
{
        for (size_t i = 0; i < sizeof(consumer_props) / sizeof(*consumer_props); i++)
                if (!strcmp(name, consumer_props[i]))
                        return 1;
        return 0;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
        struct producer *q = opaque;
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
        LOG(l, "kafka:producer", "%s: %s", fac, buf);
}

struct producer *producer_new(const struct config *cfg, char *err, size_t errsz)
{
        struct producer *q = calloc(1, sizeof(*q));
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        if (!q) {
                rd_kafka_conf_destroy(conf);
                snprintf(err, errsz, "out of memory");
                return NULL;
        }
        for (size_t i = 0; i < cfg->kafka_cnt; i++) {
                if (producer_is_consumer_property(cfg->kafka[i].name))
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

void producer_free(struct producer *q)
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

int producer_send(struct producer *q, const struct producer_record *recs, size_t n, char *err,
                  size_t errsz)
{
        size_t produced = 0;
        int64_t deadline;

        free(q->results);
        q->results = calloc(n ? n : 1, sizeof(*q->results));
        if (!q->results) {
                snprintf(err, errsz, "out of memory");
                return -1;
        }
        q->gen++;
        q->pending = 0;
        for (size_t i = 0; i < n; i++) {
                const struct producer_record *r = &recs[i];
                rd_kafka_headers_t *h = rd_kafka_headers_new(r->header_cnt ? r->header_cnt : 1);
                for (size_t k = 0; k < r->header_cnt; k++)
                        rd_kafka_header_add(h, r->headers[k].name, -1, r->headers[k].value,
                                            r->headers[k].value ? (ssize_t)r->headers[k].value_len : 0);
                q->results[i] = RD_KAFKA_RESP_ERR__IN_PROGRESS;
                uintptr_t tag = ((uintptr_t)q->gen << 32) | (uintptr_t)i;
                rd_kafka_resp_err_t e;
                do {
                        e = rd_kafka_producev(q->rk, RD_KAFKA_V_TOPIC(r->topic),
                                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                              RD_KAFKA_V_KEY(r->key, r->key ? r->key_len : 0),
                                              RD_KAFKA_V_VALUE((void *)r->value, r->value ? r->value_len : 0),
                                              RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_OPAQUE((void *)tag),
                                              RD_KAFKA_V_END);
                        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                                rd_kafka_poll(q->rk, 50);
                } while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL);
                if (e) {
                        rd_kafka_headers_destroy(h); /* not taken on failure */
                        q->results[i] = e;
                        snprintf(err, errsz, "produce to %s failed: %s", r->topic, rd_kafka_err2str(e));
                        break;
                }
                q->pending++;
                produced++;
        }
        deadline = log_now_ms() + ACK_TIMEOUT_MS;
        while (q->pending > 0 && log_now_ms() < deadline)
                rd_kafka_poll(q->rk, 100);
        if (q->pending > 0) {
                snprintf(err, errsz, "%zu record(s) not acknowledged within %d ms", q->pending,
                         ACK_TIMEOUT_MS);
                q->gen++; /* late reports of this call are ignored */
                return -1;
        }
        if (produced < n)
                return -1;
        for (size_t i = 0; i < n; i++) {
                if (q->results[i]) {
                        snprintf(err, errsz, "write to %s failed: %s", recs[i].topic,
                                 rd_kafka_err2str(q->results[i]));
                        return -1;
                }
        }
        return 0;
}

int producer_dead_letter(void *opaque, const char *dlq_topic, const char *ns,
                         struct pl_msg *const *msgs, size_t n, char *err, size_t errsz)
{
        struct producer *q = opaque;
        struct producer_record *recs = calloc(n ? n : 1, sizeof(*recs));
        struct dedupd_header **hdrs = calloc(n ? n : 1, sizeof(*hdrs));
        char (*nums)[3][24] = calloc(n ? n : 1, sizeof(*nums));
        int rc = -1;

        if (!recs || !hdrs || !nums) {
                snprintf(err, errsz, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                const struct pl_msg *m = msgs[i];
                struct dedupd_header *h = calloc(m->header_cnt + 10, sizeof(*h));
                size_t k = 0;
                if (!h) {
                        snprintf(err, errsz, "out of memory");
                        goto out;
                }
                hdrs[i] = h;
                snprintf(nums[i][0], 24, "%" PRId32, m->partition);
                snprintf(nums[i][1], 24, "%" PRId64, m->offset);
                snprintf(nums[i][2], 24, "%" PRId64, m->timestamp_ms);
                for (; k < m->header_cnt; k++)
                        h[k] = m->headers[k];
#define HDR(n_, v_) (h[k++] = (struct dedupd_header){(n_), (v_), strlen(v_)})
                HDR("dedupd.reason", m->dlq_reason ? m->dlq_reason : "unknown");
                HDR("dedupd.origin.topic", m->topic);
                HDR("dedupd.origin.partition", nums[i][0]);
                HDR("dedupd.origin.offset", nums[i][1]);
                HDR("dedupd.origin.timestamp", nums[i][2]);
                HDR("dedupd.namespace", ns);
                if (m->idem_key)
                        HDR("dedupd.key", m->idem_key);
                if (m->fingerprint[0])
                        HDR("dedupd.fingerprint.message", m->fingerprint);
                if (m->stored_fingerprint[0])
                        HDR("dedupd.fingerprint.stored", m->stored_fingerprint);
#undef HDR
                recs[i] = (struct producer_record){dlq_topic, m->key, m->key_len, m->value, m->value_len,
                                                   h, k};
        }
        rc = producer_send(q, recs, n, err, errsz);
out:
        for (size_t i = 0; hdrs && i < n; i++)
                free(hdrs[i]);
        free(hdrs);
        free(recs);
        free(nums);
        return rc;
}
