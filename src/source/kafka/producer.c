/* producer: the acknowledged producer — dead letters, replies and the outbox are handed back only once the broker has them. */
#include "source/kafka/producer.h"
#include "source/kafka/destination.h"

#include "base/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "base/log.h"
#include "source/kafka/client.h"
#include "source/kafka/topics.h"

#define ACK_TIMEOUT_MS 30000

struct producer {
        rd_kafka_t *rk;
        /* Delivery results of the call in progress. A report for an older
         * call (after a timeout) carries an older generation and is ignored. */
        uint32_t gen;
        rd_kafka_resp_err_t *results;
        size_t pending;
        int64_t max_bytes;          /* message.max.bytes in effect */
        const struct config *cfg;   /* for the dead-letter topics' limits */
        const int64_t *dlq_max_bytes; /* per config topic: its DLQ's max.message.bytes, -1 unknown */
};

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

/* Whatever dedupd can consume it must be able to dead-letter: librdkafka's
 * own limit (message.max.bytes, 1000000 by default) is raised to the largest
 * dead letter dedupd may write, unless the kafka: map sets it. */
static int64_t wanted_max_bytes(const struct config *cfg, const int64_t *dlq_max_bytes)
{
        int64_t want = 1000000;
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                int64_t need = (int64_t)cfg->topics[i].max_payload_bytes + TOPICS_DLQ_HEADROOM;
                if (dlq_max_bytes && dlq_max_bytes[i] > need)
                        need = dlq_max_bytes[i];
                if (need > want)
                        want = need;
        }
        return want > 1000000000 ? 1000000000 : want;
}

static int64_t smallest_batch(const struct config *cfg, const int64_t *dlq_max_bytes)
{
        int64_t b = 1000000; /* librdkafka's default batch.size */
        for (size_t i = 0; dlq_max_bytes && i < cfg->topic_cnt; i++)
                if (dlq_max_bytes[i] > 0 && dlq_max_bytes[i] < b)
                        b = dlq_max_bytes[i];
        return b;
}

struct producer *producer_new(const struct config *cfg, const int64_t *dlq_max_bytes, char *err,
                              size_t errsz)
{
        struct producer *q = xcalloc(1, sizeof(*q));
        rd_kafka_conf_t *conf = kafka_conf(cfg, KAFKA_ROLE_CLIENT, NULL, err, errsz);
        const char *user_max = kafka_property(cfg, "message.max.bytes");
        char size[24];

        if (!conf) {
                free(q);
                return NULL;
        }
        q->cfg = cfg;
        q->dlq_max_bytes = dlq_max_bytes;
        q->max_bytes = user_max ? strtoll(user_max, NULL, 10) : wanted_max_bytes(cfg, dlq_max_bytes);
        snprintf(size, sizeof(size), "%" PRId64, q->max_bytes);
        if (!user_max && rd_kafka_conf_set(conf, "message.max.bytes", size, err, errsz))
                goto error;
        /* A batch of several dead letters must fit the smallest dead-letter
         * topic the broker told of. */
        snprintf(size, sizeof(size), "%" PRId64, smallest_batch(cfg, dlq_max_bytes));
        if (!kafka_user_set(cfg, "batch.size") && rd_kafka_conf_set(conf, "batch.size", size, err, errsz))
                goto error;
        /* A topic that does not exist (a dead-letter topic deleted while
         * running) fails its records after this, not after message.timeout.ms:
         * the topic waiting on it backs off sooner and says why. */
        if (!kafka_user_set(cfg, "topic.metadata.propagation.max.ms") &&
            rd_kafka_conf_set(conf, "topic.metadata.propagation.max.ms", "5000", err, errsz))
                goto error;
        /* Idempotent: a retried produce never duplicates inside the broker. */
        if (rd_kafka_conf_set(conf, "enable.idempotence", "true", err, errsz) ||
            rd_kafka_conf_set(conf, "acks", "all", err, errsz) ||
            rd_kafka_conf_set(conf, "linger.ms", "5", err, errsz) ||
            rd_kafka_conf_set(conf, "message.timeout.ms", "25000", err, errsz))
                goto error;
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
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

static int publish(void *opaque, const struct record *recs, size_t n, char *err, size_t errsz)
{
        return producer_send(opaque, recs, n, err, errsz);
}

struct sink producer_sink(struct producer *q)
{
        return (struct sink){.publish = publish, .dead_letter = producer_dead_letter, .opaque = q, .check = kafka_record_check};
}

int producer_send(struct producer *q, const struct record *recs, size_t n, char *err, size_t errsz)
{
        size_t produced = 0;
        int64_t deadline;

        free(q->results);
        q->results = xcalloc(n ? n : 1, sizeof(*q->results));
        q->gen++;
        q->pending = 0;
        for (size_t i = 0; i < n; i++) {
                const struct record *r = &recs[i];
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
                        continue; /* the others still go: the caller sees each result */
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

/* ---- dead letters ---------------------------------------------------------- */

/* dedupd's headers on a dead letter, and room for the original ones. */
#define DLQ_OWN_HEADERS 12

/* One dead letter being built: the record and the storage it points into. */
struct dead_letter {
        struct record rec;
        struct dedupd_header *h;
        char nums[4][24];  /* partition, offset, timestamp, original size */
        char note[320];    /* dedupd.truncated */
};

/* What the broker will count of a record, a little generously: key, value,
 * headers with their framing, and the record batch around it. */
static size_t wire_size(const struct record *r)
{
        size_t n = 128 + (r->key ? r->key_len : 0) + (r->value ? r->value_len : 0);
        for (size_t k = 0; k < r->header_cnt; k++)
                n += strlen(r->headers[k].name) + r->headers[k].value_len + 16;
        return n;
}

/* The largest record the dead-letter topic takes. */
static int64_t dlq_limit(const struct producer *q, const char *dlq_topic)
{
        for (size_t i = 0; q->dlq_max_bytes && i < q->cfg->topic_cnt; i++)
                if (q->dlq_max_bytes[i] > 0 && !strcmp(q->cfg->topics[i].dlq_topic, dlq_topic))
                        return q->dlq_max_bytes[i] < q->max_bytes ? q->dlq_max_bytes[i] : q->max_bytes;
        return q->max_bytes;
}

#define HDR(d_, n_, v_) ((d_)->h[(d_)->rec.header_cnt++] = (struct dedupd_header){(n_), (v_), strlen(v_)})

/* dedupd's own headers: why, from where, which key. */
static void own_headers(struct dead_letter *d, const struct pl_msg *m, const char *ns)
{
        snprintf(d->nums[0], sizeof(d->nums[0]), "%" PRId32, m->partition);
        snprintf(d->nums[1], sizeof(d->nums[1]), "%" PRId64, m->offset);
        snprintf(d->nums[2], sizeof(d->nums[2]), "%" PRId64, m->timestamp_ms);
        HDR(d, "dedupd.reason", m->dlq_reason ? m->dlq_reason : "unknown");
        HDR(d, "dedupd.origin.topic", m->topic);
        HDR(d, "dedupd.origin.partition", d->nums[0]);
        HDR(d, "dedupd.origin.offset", d->nums[1]);
        HDR(d, "dedupd.origin.timestamp", d->nums[2]);
        HDR(d, "dedupd.namespace", ns);
        if (m->idem_key)
                HDR(d, "dedupd.key", m->idem_key);
        if (m->fingerprint[0])
                HDR(d, "dedupd.fingerprint.message", m->fingerprint);
        if (m->stored_fingerprint[0])
                HDR(d, "dedupd.fingerprint.stored", m->stored_fingerprint);
}

/* The message unchanged (key, value, headers) plus dedupd's headers. */
static void dead_letter_whole(struct dead_letter *d, const char *dlq_topic, const struct pl_msg *m,
                              const char *ns)
{
        d->h = xcalloc(m->header_cnt + DLQ_OWN_HEADERS, sizeof(*d->h));
        d->rec = (struct record){dlq_topic, m->key, m->key_len, m->value, m->value_len, d->h, 0, NULL, 0};
        for (size_t k = 0; k < m->header_cnt; k++)
                d->h[d->rec.header_cnt++] = m->headers[k];
        own_headers(d, m, ns);
}

/* Too large for the dead-letter topic: keep what fits of the value, or, when
 * even the key and headers do not fit (or the broker refused it anyway),
 * only dedupd's headers. The original stays at its origin in the topic. */
static void dead_letter_cut(struct dead_letter *d, const struct pl_msg *m, const char *ns, int64_t limit,
                            int minimal)
{
        size_t without_value = wire_size(&d->rec) - (d->rec.value ? d->rec.value_len : 0) + 400;
        snprintf(d->nums[3], sizeof(d->nums[3]), "%zu", m->value_len);
        if (!minimal && without_value < (size_t)limit) {
                d->rec.value_len = (size_t)limit - without_value;
                snprintf(d->note, sizeof(d->note),
                         "value cut to its first %zu of %zu bytes: the dead-letter topic takes records of "
                         "at most %" PRId64 " bytes; the whole record stays at its origin",
                         d->rec.value_len, m->value_len, limit);
        } else {
                d->rec.key = NULL;
                d->rec.key_len = 0;
                d->rec.value = NULL;
                d->rec.value_len = 0;
                d->rec.header_cnt = 0;
                own_headers(d, m, ns);
                snprintf(d->note, sizeof(d->note),
                         "key, value and headers left out (%zu-byte value): the record does not fit the "
                         "dead-letter topic (at most %" PRId64 " bytes); the whole record stays at its origin",
                         m->value_len, limit);
        }
        HDR(d, "dedupd.truncated", d->note);
        HDR(d, "dedupd.original.size", d->nums[3]);
}
#undef HDR

static int too_large(rd_kafka_resp_err_t e)
{
        return e == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE || e == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE;
}

int producer_dead_letter(void *opaque, const char *dlq_topic, const char *ns,
                         struct pl_msg *const *msgs, size_t n, char *err, size_t errsz)
{
        struct producer *q = opaque;
        struct dead_letter *d = xcalloc(n ? n : 1, sizeof(*d));
        struct record *recs = xcalloc(n ? n : 1, sizeof(*recs));
        int64_t limit = dlq_limit(q, dlq_topic);
        size_t again = 0;
        int rc = -1;

        for (size_t i = 0; i < n; i++) {
                dead_letter_whole(&d[i], dlq_topic, msgs[i], ns);
                if (wire_size(&d[i].rec) > (size_t)limit)
                        dead_letter_cut(&d[i], msgs[i], ns, limit, 0);
                recs[i] = d[i].rec;
        }
        rc = producer_send(q, recs, n, err, errsz);
        if (!rc)
                goto out;
        /* Refused for its size after all (compression, framing): send what
         * is sure to fit rather than block the partition forever. */
        for (size_t i = 0; i < n; i++) {
                if (!too_large(q->results[i]))
                        continue;
                dead_letter_cut(&d[i], msgs[i], ns, limit, 1);
                log_warn("kafka:producer", "dead letter of %s/%d offset %" PRId64 " refused as too large "
                                           "by %s: sending dedupd's headers only",
                         msgs[i]->topic, (int)msgs[i]->partition, msgs[i]->offset, dlq_topic);
                recs[again++] = d[i].rec;
        }
        for (size_t i = 0; i < n; i++)
                if (q->results[i] && !too_large(q->results[i]))
                        goto out; /* another failure: the batch is retried whole */
        if (again)
                rc = producer_send(q, recs, again, err, errsz);
out:
        for (size_t i = 0; d && i < n; i++)
                free(d[i].h);
        free(d);
        free(recs);
        return rc;
}
