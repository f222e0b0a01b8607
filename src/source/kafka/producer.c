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
#define DLQ_MESSAGE_TIMEOUT_MS 25000 /* the dead letters' message.timeout.ms, within ACK_TIMEOUT_MS */
/* librdkafka fails a timed-out message on its next timeout scan (about once
 * a second): the relay waits that much past message.timeout.ms. */
#define SCAN_SLACK_MS 1500

/* One librdkafka producer, and the delivery results of its call in progress.
 * A report for an older call (after a timeout) carries an older generation
 * and is ignored. */
struct lane {
        rd_kafka_t *rk;
        uint32_t gen;
        rd_kafka_resp_err_t *results;
        size_t pending;
};

struct producer {
        struct lane dlq;          /* dead letters: as long as they need (ACK_TIMEOUT_MS) */
        struct lane relay;        /* the outbox: message.timeout.ms is outbox.publish_timeout_ms; made at first use */
        int64_t max_bytes;        /* message.max.bytes in effect */
        const struct config *cfg; /* for the dead-letter topics' limits */
        const int64_t *dlq_max_bytes; /* per config topic: its DLQ's max.message.bytes, -1 unknown */
};

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
        struct lane *l = opaque;
        uintptr_t tag = (uintptr_t)m->_private;
        uint32_t gen = (uint32_t)(tag >> 32);
        size_t idx = (size_t)(tag & 0xffffffffu);
        (void)rk;
        if (gen != l->gen || !l->results)
                return;
        l->results[idx] = m->err;
        l->pending--;
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

/* A producer for lane l: the kafka: map, dedupd's own settings, and
 * message_timeout_ms; NULL with err. */
static rd_kafka_t *lane_open(struct producer *q, struct lane *l, int message_timeout_ms, char *err, size_t errsz)
{
        rd_kafka_conf_t *conf = kafka_conf(q->cfg, KAFKA_ROLE_CLIENT, NULL, err, errsz);
        const char *user_prop = kafka_property(q->cfg, "topic.metadata.propagation.max.ms");
        char size[24], timeout[24], propagation[24];
        rd_kafka_t *rk;

        if (!conf)
                return NULL;
        snprintf(size, sizeof(size), "%" PRId64, q->max_bytes);
        if (!kafka_user_set(q->cfg, "message.max.bytes") &&
            rd_kafka_conf_set(conf, "message.max.bytes", size, err, errsz))
                goto error;
        /* A batch of several dead letters must fit the smallest dead-letter
         * topic the broker told of. */
        snprintf(size, sizeof(size), "%" PRId64, smallest_batch(q->cfg, q->dlq_max_bytes));
        if (!kafka_user_set(q->cfg, "batch.size") && rd_kafka_conf_set(conf, "batch.size", size, err, errsz))
                goto error;
        /* A topic that does not exist (a dead-letter topic deleted while
         * running, a reply topic nobody created) fails its records after
         * this, not after message.timeout.ms: the topic waiting on it backs
         * off sooner and says why. Within the timeout, so that the relay
         * can tell a refused record from a broker that does not answer. */
        int prop_ms = user_prop ? atoi(user_prop) : 5000;
        if (prop_ms > message_timeout_ms / 2)
                prop_ms = message_timeout_ms / 2;
        snprintf(propagation, sizeof(propagation), "%d", prop_ms);
        if ((!user_prop || l == &q->relay) &&
            rd_kafka_conf_set(conf, "topic.metadata.propagation.max.ms", propagation, err, errsz))
                goto error;
        /* Idempotent: a retried produce never duplicates inside the broker. */
        snprintf(timeout, sizeof(timeout), "%d", message_timeout_ms);
        if (rd_kafka_conf_set(conf, "enable.idempotence", "true", err, errsz) ||
            rd_kafka_conf_set(conf, "acks", "all", err, errsz) ||
            rd_kafka_conf_set(conf, "linger.ms", "5", err, errsz) ||
            rd_kafka_conf_set(conf, "message.timeout.ms", timeout, err, errsz))
                goto error;
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_conf_set_opaque(conf, l);
        if (!(rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, errsz)))
                goto error;
        return rk; /* conf is now owned by rk */
error:
        rd_kafka_conf_destroy(conf);
        return NULL;
}

struct producer *producer_new(const struct config *cfg, const int64_t *dlq_max_bytes, char *err, size_t errsz)
{
        struct producer *q = xcalloc(1, sizeof(*q));
        const char *user_max = kafka_property(cfg, "message.max.bytes");

        q->cfg = cfg;
        q->dlq_max_bytes = dlq_max_bytes;
        q->max_bytes = user_max ? strtoll(user_max, NULL, 10) : wanted_max_bytes(cfg, dlq_max_bytes);
        if (!(q->dlq.rk = lane_open(q, &q->dlq, DLQ_MESSAGE_TIMEOUT_MS, err, errsz))) {
                free(q);
                return NULL;
        }
        return q;
}

static void lane_close(struct lane *l)
{
        if (l->rk) {
                rd_kafka_flush(l->rk, 5000);
                l->gen++;
                rd_kafka_destroy(l->rk);
                l->rk = NULL;
        }
        free(l->results);
        l->results = NULL;
}

void producer_free(struct producer *q)
{
        if (!q)
                return;
        lane_close(&q->relay);
        lane_close(&q->dlq);
        free(q);
}

/* Produce every record on lane l and wait up to wait_ms for the reports:
 * l->results[i] is each one's (RD_KAFKA_RESP_ERR__IN_PROGRESS: none came).
 * Returns the number still unreported. */
static size_t lane_send(struct lane *l, const struct record *recs, size_t n, int wait_ms)
{
        free(l->results);
        l->results = xcalloc(n ? n : 1, sizeof(*l->results));
        l->gen++;
        l->pending = 0;
        if (!l->rk) { /* dropped after a fatal error, and no new one could be made */
                for (size_t i = 0; i < n; i++)
                        l->results[i] = RD_KAFKA_RESP_ERR__FATAL;
                return 0;
        }
        for (size_t i = 0; i < n; i++) {
                const struct record *r = &recs[i];
                rd_kafka_headers_t *h = rd_kafka_headers_new(r->header_cnt ? r->header_cnt : 1);
                for (size_t k = 0; k < r->header_cnt; k++)
                        rd_kafka_header_add(h, r->headers[k].name, -1, r->headers[k].value,
                                            r->headers[k].value ? (ssize_t)r->headers[k].value_len : 0);
                l->results[i] = RD_KAFKA_RESP_ERR__IN_PROGRESS;
                uintptr_t tag = ((uintptr_t)l->gen << 32) | (uintptr_t)i;
                rd_kafka_resp_err_t e;
                do {
                        e = rd_kafka_producev(l->rk, RD_KAFKA_V_TOPIC(r->topic),
                                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                              RD_KAFKA_V_KEY(r->key, r->key ? r->key_len : 0),
                                              RD_KAFKA_V_VALUE((void *)r->value, r->value ? r->value_len : 0),
                                              RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_OPAQUE((void *)tag), RD_KAFKA_V_END);
                        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                                rd_kafka_poll(l->rk, 50);
                } while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL);
                if (e) {
                        rd_kafka_headers_destroy(h); /* not taken on failure */
                        l->results[i] = e;
                        continue; /* the others still go: the caller sees each result */
                }
                l->pending++;
        }
        int64_t deadline = log_now_ms() + wait_ms;
        while (l->pending > 0 && log_now_ms() < deadline)
                rd_kafka_poll(l->rk, 100);
        size_t left = l->pending;
        if (left)
                l->gen++; /* late reports of this call are ignored */
        return left;
}

/* After a fatal error the idempotent producer takes nothing more: it is
 * dropped, and the next call makes a new one (what: whose producer). */
static void lane_check_fatal(struct lane *l, const char *what)
{
        char why[256];
        if (!l->rk || !rd_kafka_fatal_error(l->rk, why, sizeof(why)))
                return;
        log_error("kafka:producer", "the %s producer failed for good (%s): making a new one", what, why);
        l->gen++;
        rd_kafka_destroy(l->rk);
        l->rk = NULL;
}

int producer_send(struct producer *q, const struct record *recs, size_t n, char *err, size_t errsz)
{
        char why[512];
        if (!q->dlq.rk && !(q->dlq.rk = lane_open(q, &q->dlq, DLQ_MESSAGE_TIMEOUT_MS, why, sizeof(why))))
                log_error("kafka:producer", "a new dead-letter producer: %s", why);
        size_t left = lane_send(&q->dlq, recs, n, ACK_TIMEOUT_MS);
        lane_check_fatal(&q->dlq, "dead-letter"); /* its results stay, for the caller to read */
        if (left) {
                snprintf(err, errsz, "%zu record(s) not acknowledged within %d ms", left, ACK_TIMEOUT_MS);
                return -1;
        }
        for (size_t i = 0; i < n; i++) {
                if (q->dlq.results[i]) {
                        snprintf(err, errsz, "write to %s failed: %s", recs[i].topic,
                                 rd_kafka_err2str(q->dlq.results[i]));
                        return -1;
                }
        }
        return 0;
}

/* Not the record's doing: the broker is unreachable or did not answer in
 * time, or the producer itself failed. */
static int not_the_records(rd_kafka_resp_err_t e)
{
        return kafka_err_unreachable(e) || e == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT ||
               e == RD_KAFKA_RESP_ERR__IN_PROGRESS || e == RD_KAFKA_RESP_ERR__FATAL ||
               e == RD_KAFKA_RESP_ERR__PURGE_QUEUE || e == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT ||
               e == RD_KAFKA_RESP_ERR__DESTROY;
}

static void outcome_of(rd_kafka_resp_err_t e, const char *topic, int timeout_ms, struct sink_outcome *o)
{
        o->fate = !e ? SINK_ACKED : not_the_records(e) ? SINK_UNSENT : SINK_FAILED;
        if (e == RD_KAFKA_RESP_ERR__IN_PROGRESS)
                snprintf(o->reason, sizeof(o->reason),
                         "write to %s not acknowledged within %d ms "
                         "(outbox.publish_timeout_ms)",
                         topic, timeout_ms);
        else if (e)
                snprintf(o->reason, sizeof(o->reason), "write to %s failed: %s", topic, rd_kafka_err2str(e));
}

/* The outbox: every record produced at once on the relay's own producer,
 * whose message.timeout.ms is outbox.publish_timeout_ms, each answered. */
static void publish(void *opaque, const struct record *recs, size_t n, struct sink_outcome *out)
{
        struct producer *q = opaque;
        int timeout = q->cfg->outbox_publish_timeout_ms;
        char err[512];

        if (!q->relay.rk && !(q->relay.rk = lane_open(q, &q->relay, timeout, err, sizeof(err)))) {
                for (size_t i = 0; i < n; i++) {
                        out[i].fate = SINK_UNSENT;
                        snprintf(out[i].reason, sizeof(out[i].reason), "the outbox producer: %s", err);
                }
                return;
        }
        if (lane_send(&q->relay, recs, n, timeout + SCAN_SLACK_MS))
                rd_kafka_purge(q->relay.rk, RD_KAFKA_PURGE_F_QUEUE); /* not sent later behind the relay's back */
        for (size_t i = 0; i < n; i++)
                outcome_of(q->relay.results[i], recs[i].topic, timeout, &out[i]);
        lane_check_fatal(&q->relay, "outbox");
}

struct sink producer_sink(struct producer *q)
{
        return (struct sink){
                .publish = publish, .dead_letter = producer_dead_letter, .opaque = q, .check = kafka_record_check};
}

/* ---- dead letters ---------------------------------------------------------- */

/* dedupd's headers on a dead letter, and room for the original ones. */
#define DLQ_OWN_HEADERS 12

/* One dead letter being built: the record and the storage it points into. */
struct dead_letter {
        struct record rec;
        struct dedupd_header *h;
        char nums[4][24]; /* partition, offset, timestamp, original size */
        char note[320];   /* dedupd.truncated */
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
static void own_headers(struct dead_letter *d, const struct pl_dead_letter *dl, const char *ns)
{
        const struct pl_msg *m = dl->msg;
        snprintf(d->nums[0], sizeof(d->nums[0]), "%" PRId32, m->partition);
        snprintf(d->nums[1], sizeof(d->nums[1]), "%" PRId64, m->offset);
        snprintf(d->nums[2], sizeof(d->nums[2]), "%" PRId64, m->timestamp_ms);
        HDR(d, "dedupd.reason", dl->reason);
        HDR(d, "dedupd.origin.topic", m->topic);
        HDR(d, "dedupd.origin.partition", d->nums[0]);
        HDR(d, "dedupd.origin.offset", d->nums[1]);
        HDR(d, "dedupd.origin.timestamp", d->nums[2]);
        HDR(d, "dedupd.namespace", ns);
        if (dl->idem_key)
                HDR(d, "dedupd.key", dl->idem_key);
        if (dl->fingerprint)
                HDR(d, "dedupd.fingerprint.message", dl->fingerprint);
        if (dl->stored_fingerprint)
                HDR(d, "dedupd.fingerprint.stored", dl->stored_fingerprint);
}

/* The message unchanged (key, value, headers) plus dedupd's headers. */
static void dead_letter_whole(struct dead_letter *d, const char *dlq_topic, const struct pl_dead_letter *dl,
                              const char *ns)
{
        const struct pl_msg *m = dl->msg;
        d->h = xcalloc(m->header_cnt + DLQ_OWN_HEADERS, sizeof(*d->h));
        d->rec = (struct record){dlq_topic, m->key, m->key_len, m->value, m->value_len, d->h, 0, NULL, 0, NULL};
        for (size_t k = 0; k < m->header_cnt; k++)
                d->h[d->rec.header_cnt++] = m->headers[k];
        own_headers(d, dl, ns);
}

/* Too large for the dead-letter topic: keep what fits of the value, or, when
 * even the key and headers do not fit (or the broker refused it anyway),
 * only dedupd's headers. The original stays at its origin in the topic. */
static void dead_letter_cut(struct dead_letter *d, const struct pl_dead_letter *dl, const char *ns, int64_t limit,
                            int minimal)
{
        const struct pl_msg *m = dl->msg;
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
                own_headers(d, dl, ns);
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

int producer_dead_letter(void *opaque, const char *dlq_topic, const char *ns, const struct pl_dead_letter *letters,
                         size_t n, char *err, size_t errsz)
{
        struct producer *q = opaque;
        struct dead_letter *d = xcalloc(n ? n : 1, sizeof(*d));
        struct record *recs = xcalloc(n ? n : 1, sizeof(*recs));
        int64_t limit = dlq_limit(q, dlq_topic);
        size_t again = 0;
        int rc = -1;

        for (size_t i = 0; i < n; i++) {
                dead_letter_whole(&d[i], dlq_topic, &letters[i], ns);
                if (wire_size(&d[i].rec) > (size_t)limit)
                        dead_letter_cut(&d[i], &letters[i], ns, limit, 0);
                recs[i] = d[i].rec;
        }
        rc = producer_send(q, recs, n, err, errsz);
        if (!rc)
                goto out;
        /* Refused for its size after all (compression, framing): send what
         * is sure to fit rather than block the partition forever. */
        for (size_t i = 0; i < n; i++) {
                if (!too_large(q->dlq.results[i]))
                        continue;
                dead_letter_cut(&d[i], &letters[i], ns, limit, 1);
                log_warn("kafka:producer",
                         "dead letter of %s/%d offset %" PRId64 " refused as too large "
                         "by %s: sending dedupd's headers only",
                         letters[i].msg->topic, (int)letters[i].msg->partition, letters[i].msg->offset, dlq_topic);
                recs[again++] = d[i].rec;
        }
        for (size_t i = 0; i < n; i++)
                if (q->dlq.results[i] && !too_large(q->dlq.results[i]))
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
