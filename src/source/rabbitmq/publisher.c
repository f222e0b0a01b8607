/* publisher: the confirmed publisher — dead letters, replies and the outbox handed back only once the broker confirmed them. */
#include "source/rabbitmq/publisher.h"
#include "source/rabbitmq/destination.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <amqp.h>

#include "base/log.h"
#include "base/mem.h"
#include "source/rabbitmq/connection.h"
#include "source/rabbitmq/consumer.h"
#include "source/rabbitmq/exchanges.h"
#include "source/rabbitmq/headers.h"
#include "source/rabbitmq/settings.h"

#define PUB_CHANNEL 1
#define CHECK_CHANNEL 2          /* passive declares: a refusal closes this one, not the publishing channel */
#define CONFIRM_TIMEOUT_MS 15000 /* dead letters; the outbox waits outbox.publish_timeout_ms */

struct rmq_publisher {
        const struct config *cfg;
        amqp_connection_state_t conn;   /* NULL: connect on next use */
        uint64_t next_tag;              /* publish sequence number of the next message */
        struct rmq_exchanges exchanges; /* found to exist on conn */
        struct source *src;
};

/* One message to publish, as AMQP has it. */
struct outgoing {
        amqp_bytes_t exchange, routing_key, body;
        amqp_basic_properties_t props;
};

struct rmq_publisher *rmq_publisher_new(const struct config *cfg)
{
        struct rmq_publisher *p = xcalloc(1, sizeof(*p));
        p->cfg = cfg;
        return p;
}

void rmq_publisher_free(struct rmq_publisher *p)
{
        if (!p)
                return;
        rmq_disconnect(p->conn);
        rmq_exchanges_forget(&p->exchanges);
        free(p);
}

void rmq_publisher_attach(struct rmq_publisher *p, struct source *src) { p->src = src; }

static void drop(struct rmq_publisher *p)
{
        if (p->conn)
                amqp_destroy_connection(p->conn);
        p->conn = NULL;
        rmq_exchanges_forget(&p->exchanges);
}

/* A connection whose channel confirms every publish. No heartbeat: between
 * publishes it may idle for hours; a dead one fails the next publish,
 * which is retried on a new one. */
static int ensure(struct rmq_publisher *p, char *err, size_t errsz)
{
        if (p->conn)
                return 0;
        if (!(p->conn = rmq_connect(p->cfg, 0, err, errsz)))
                return -1;
        if (rmq_channel_open(p->conn, PUB_CHANNEL, err, errsz))
                goto error;
        amqp_confirm_select(p->conn, PUB_CHANNEL);
        if (rmq_check(p->conn, "confirm.select", NULL, err, errsz))
                goto error;
        p->next_tag = 1;
        return 0;
error:
        drop(p);
        return -1;
}

/* The messages of one send_all, from delivery tag first on, and what the
 * broker said of each. */
struct confirms {
        uint64_t first;
        size_t n;
        const struct outgoing *out;
        struct sink_outcome *res; /* SINK_UNSENT with an empty reason: no word yet */
        size_t waiting;
};

static int pending(const struct confirms *c, size_t i) { return c->res[i].fate == SINK_UNSENT && !c->res[i].reason[0]; }

static void settle(struct confirms *c, size_t i, enum sink_fate fate, const char *why)
{
        c->res[i].fate = fate;
        snprintf(c->res[i].reason, sizeof(c->res[i].reason), "%s", why);
        c->waiting--;
}

/* basic.ack or basic.nack of tag (and, multiple, of every tag before it). */
static void on_confirm(struct confirms *c, uint64_t tag, int multiple, int ack)
{
        for (uint64_t t = multiple ? c->first : tag; t <= tag; t++)
                if (t >= c->first && t < c->first + c->n && pending(c, (size_t)(t - c->first)))
                        settle(c, (size_t)(t - c->first), ack ? SINK_ACKED : SINK_FAILED,
                               ack ? "" : "the broker refused a message (basic.nack)");
}

static int same(amqp_bytes_t a, amqp_bytes_t b) { return a.len == b.len && !memcmp(a.bytes, b.bytes, a.len); }

/* basic.return: the broker sends it before the message's ack; the message
 * is the first unconfirmed one with that exchange and routing key. */
static void on_return(struct confirms *c, const amqp_basic_return_t *r)
{
        char a[256], b[256], t[256], why[900];
        snprintf(why, sizeof(why), "exchange '%s' routed a message with routing key '%s' to no queue: %u %s",
                 rmq_str(r->exchange, a, sizeof(a)), rmq_str(r->routing_key, b, sizeof(b)), r->reply_code,
                 rmq_str(r->reply_text, t, sizeof(t)));
        for (size_t i = 0; i < c->n; i++) {
                const struct outgoing *o = &c->out[i];
                if (pending(c, i) && same(o->exchange, r->exchange) && same(o->routing_key, r->routing_key)) {
                        settle(c, i, SINK_FAILED, why);
                        return;
                }
        }
}

/* Every message without an answer yet: unsent (the connection went, or the
 * broker did not answer in time), with why. */
static void unanswered(struct confirms *c, const char *why)
{
        for (size_t i = 0; i < c->n; i++)
                if (pending(c, i))
                        settle(c, i, SINK_UNSENT, why);
}

/* A method frame while waiting for confirms; -1: the wait is over (the
 * channel or the connection was closed). */
static int on_method(struct rmq_publisher *p, const amqp_frame_t *f, struct confirms *c)
{
        char a[256], why[400];
        switch (f->payload.method.id) {
        case AMQP_BASIC_ACK_METHOD: {
                const amqp_basic_ack_t *k = f->payload.method.decoded;
                on_confirm(c, k->delivery_tag, k->multiple, 1);
                return 0;
        }
        case AMQP_BASIC_NACK_METHOD: {
                const amqp_basic_nack_t *k = f->payload.method.decoded;
                on_confirm(c, k->delivery_tag, k->multiple, 0);
                return 0;
        }
        case AMQP_BASIC_RETURN_METHOD: on_return(c, f->payload.method.decoded); return 0;
        case AMQP_CHANNEL_CLOSE_METHOD: {
                const amqp_channel_close_t *k = f->payload.method.decoded;
                snprintf(why, sizeof(why), "the broker closed the publishing channel: %u %s", k->reply_code,
                         rmq_str(k->reply_text, a, sizeof(a)));
                break;
        }
        case AMQP_CONNECTION_CLOSE_METHOD: {
                const amqp_connection_close_t *k = f->payload.method.decoded;
                snprintf(why, sizeof(why), "the broker closed the publishing connection: %u %s", k->reply_code,
                         rmq_str(k->reply_text, a, sizeof(a)));
                break;
        }
        default: return 0;
        }
        drop(p);
        unanswered(c, why);
        return -1;
}

/* Until every message of c has its answer, or timeout_ms passed. */
static void wait_confirms(struct rmq_publisher *p, struct confirms *c, int timeout_ms)
{
        int64_t deadline = log_now_ms() + timeout_ms;
        char why[300];
        while (c->waiting) {
                int64_t left = deadline - log_now_ms();
                struct timeval tv = {left > 0 ? left / 1000 : 0, left > 0 ? (left % 1000) * 1000 : 0};
                amqp_frame_t f;
                if (left <= 0) {
                        snprintf(why, sizeof(why), "no confirm from the broker within %d ms", timeout_ms);
                        drop(p);
                        unanswered(c, why);
                        break;
                }
                int st = amqp_simple_wait_frame_noblock(p->conn, &f, &tv);
                if (st == AMQP_STATUS_TIMEOUT)
                        continue;
                if (st != AMQP_STATUS_OK) {
                        snprintf(why, sizeof(why), "waiting for confirms: %s", amqp_error_string2(st));
                        drop(p);
                        unanswered(c, why);
                        break;
                }
                if (f.frame_type == AMQP_FRAME_METHOD && on_method(p, &f, c))
                        break;
        }
        if (p->conn)
                amqp_maybe_release_buffers(p->conn);
}

/* Publish out[0..n) on the confirming channel; res[i] says what the broker
 * said of out[i] within timeout_ms. */
static void send_all(struct rmq_publisher *p, const struct outgoing *out, size_t n, int timeout_ms,
                     struct sink_outcome *res)
{
        struct confirms c = {.out = out, .n = n, .res = res, .waiting = n};
        char target[300], why[sizeof(res->reason)];
        for (size_t i = 0; i < n; i++)
                res[i] = (struct sink_outcome){.fate = SINK_UNSENT};
        if (ensure(p, why, sizeof(why))) {
                unanswered(&c, why);
                return;
        }
        c.first = p->next_tag;
        for (size_t i = 0; i < n; i++) {
                int st = amqp_basic_publish(p->conn, PUB_CHANNEL, out[i].exchange, out[i].routing_key,
                                            1 /* mandatory */, 0, &out[i].props, out[i].body);
                if (st != AMQP_STATUS_OK) {
                        snprintf(why, sizeof(why), "publishing to %s: %s", rmq_target(p->cfg, target, sizeof(target)),
                                 amqp_error_string2(st));
                        drop(p);
                        unanswered(&c, why);
                        return;
                }
                p->next_tag++;
        }
        wait_confirms(p, &c, timeout_ms);
}

/* All of them confirmed, or -1 with the first one's trouble. */
static int all_confirmed(const struct sink_outcome *res, size_t n, char *err, size_t errsz)
{
        for (size_t i = 0; i < n; i++)
                if (res[i].fate != SINK_ACKED) {
                        snprintf(err, errsz, "%s", res[i].reason);
                        return -1;
                }
        return 0;
}

static amqp_bytes_t bytes_of(const void *v, size_t len) { return (amqp_bytes_t){len, (void *)(v ? v : "")}; }

/* What the broker would refuse before confirming anything, or that would
 * leave a frame half sent: known here, said here. 0 fine, -1 with why. */
static int unpublishable(const struct rmq_publisher *p, const struct record *r, char *why, size_t whysz)
{
        size_t table = 0;
        if (rmq_record_check(NULL, r, why, whysz))
                return -1;
        for (size_t k = 0; k < r->header_cnt; k++)
                table += strlen(r->headers[k].name) + r->headers[k].value_len + 8;
        if (p->conn && table + 1024 > (size_t)amqp_get_frame_max(p->conn)) {
                snprintf(why, whysz, "headers of about %zu bytes do not fit the connection's frame_max (%d)", table,
                         amqp_get_frame_max(p->conn));
                return -1;
        }
        return 0;
}

/* Records that cannot go (unpublishable, or an exchange that does not
 * exist) are FAILED in res; the others are left SINK_ACKED to be sent. A
 * connection that cannot be had leaves them all UNSENT. */
static void precheck(struct rmq_publisher *p, const struct record *recs, size_t n, struct sink_outcome *res)
{
        char why[sizeof(res->reason)];
        for (size_t i = 0; i < n; i++) {
                res[i] = (struct sink_outcome){.fate = SINK_ACKED};
                if (!p->conn && ensure(p, why, sizeof(why)))
                        goto unsent;
                if (unpublishable(p, &recs[i], res[i].reason, sizeof(res[i].reason))) {
                        res[i].fate = SINK_FAILED;
                        continue;
                }
                int e = rmq_exchange_exists(&p->exchanges, p->conn, CHECK_CHANNEL, recs[i].topic, res[i].reason,
                                            sizeof(res[i].reason));
                if (e == 0)
                        res[i].fate = SINK_FAILED;
                if (e < 0) {
                        snprintf(why, sizeof(why), "%s", res[i].reason);
                        drop(p);
                        goto unsent;
                }
        }
        return;
unsent:
        for (size_t k = 0; k < n; k++)
                res[k] = (struct sink_outcome){.fate = SINK_UNSENT};
        for (size_t k = 0; k < n; k++)
                snprintf(res[k].reason, sizeof(res[k].reason), "%s", why);
}

/* The outbox: each record to the exchange its topic names, routing key its
 * key, headers as AMQP headers, its msg_id as message_id, persistent,
 * mandatory, confirmed within outbox.publish_timeout_ms. */
static void publish(void *opaque, const struct record *recs, size_t n, struct sink_outcome *res)
{
        struct rmq_publisher *p = opaque;
        struct outgoing *out = xcalloc(n ? n : 1, sizeof(*out));
        struct sink_outcome *sent = xcalloc(n ? n : 1, sizeof(*sent));
        size_t *at = xcalloc(n ? n : 1, sizeof(*at)), k = 0;
        amqp_pool_t pool;
        init_amqp_pool(&pool, 4096);
        precheck(p, recs, n, res);
        for (size_t i = 0; i < n; i++) {
                if (res[i].fate != SINK_ACKED)
                        continue;
                at[k] = i;
                out[k].exchange = amqp_cstring_bytes(recs[i].topic);
                out[k].routing_key = bytes_of(recs[i].key, recs[i].key ? recs[i].key_len : 0);
                out[k].body = bytes_of(recs[i].value, recs[i].value ? recs[i].value_len : 0);
                out[k].props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_HEADERS_FLAG;
                out[k].props.delivery_mode = 2; /* persistent */
                out[k].props.headers = rmq_headers_table(NULL, recs[i].headers, recs[i].header_cnt, &pool);
                if (recs[i].msg_id) {
                        out[k].props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
                        out[k].props.message_id = amqp_cstring_bytes(recs[i].msg_id);
                }
                k++;
        }
        if (k)
                send_all(p, out, k, p->cfg->outbox_publish_timeout_ms, sent);
        for (size_t j = 0; j < k; j++)
                res[at[j]] = sent[j];
        empty_amqp_pool(&pool);
        free(at);
        free(sent);
        free(out);
}

/* ---- dead letters ---------------------------------------------------------- */

#define OWN_HEADERS 10

/* dedupd's own headers, the same as on Kafka: why, from where, which key. */
static size_t own_headers(struct dedupd_header *h, char nums[3][24], const struct pl_dead_letter *dl, const char *ns)
{
        const struct pl_msg *m = dl->msg;
        size_t n = 0;
        snprintf(nums[0], sizeof(nums[0]), "%" PRId32, m->partition);
        snprintf(nums[1], sizeof(nums[1]), "%" PRId64, m->offset);
        snprintf(nums[2], sizeof(nums[2]), "%" PRId64, m->timestamp_ms);
#define HDR(n_, v_) (h[n++] = (struct dedupd_header){(n_), (v_), strlen(v_)})
        HDR("dedupd.reason", dl->reason);
        HDR("dedupd.origin.topic", m->topic);
        HDR("dedupd.origin.partition", nums[0]);
        HDR("dedupd.origin.offset", nums[1]);
        HDR("dedupd.origin.timestamp", nums[2]);
        HDR("dedupd.namespace", ns);
        if (dl->idem_key)
                HDR("dedupd.key", dl->idem_key);
        if (dl->fingerprint)
                HDR("dedupd.fingerprint.message", dl->fingerprint);
        if (dl->stored_fingerprint)
                HDR("dedupd.fingerprint.stored", dl->stored_fingerprint);
#undef HDR
        return n;
}

static int reject_all(struct rmq_publisher *p, const struct pl_dead_letter *letters, size_t n, char *err, size_t errsz)
{
        for (size_t i = 0; i < n; i++)
                if (!p->src || rmq_source_reject(p->src, letters[i].msg, err, errsz))
                        return -1;
        return 0;
}

static int dead_letter(void *opaque, const char *dlq_topic, const char *ns, const struct pl_dead_letter *letters,
                       size_t n, char *err, size_t errsz)
{
        struct rmq_publisher *p = opaque;
        if (!*rmq_conf(p->cfg)->dlx)
                return reject_all(p, letters, n, err, errsz);
        struct outgoing *out = xcalloc(n ? n : 1, sizeof(*out));
        struct dedupd_header h[OWN_HEADERS];
        char nums[3][24];
        amqp_pool_t pool;
        init_amqp_pool(&pool, 4096);
        for (size_t i = 0; i < n; i++) {
                const amqp_envelope_t *env = rmq_source_envelope(letters[i].msg);
                const amqp_basic_properties_t *orig = &env->message.properties;
                size_t k = own_headers(h, nums, &letters[i], ns);
                out[i].exchange = amqp_cstring_bytes(rmq_conf(p->cfg)->dlx);
                out[i].routing_key = amqp_cstring_bytes(dlq_topic);
                out[i].body = env->message.body;
                out[i].props = *orig;
                out[i].props._flags |= AMQP_BASIC_HEADERS_FLAG;
                /* The table points at h and nums: copied into the pool now. */
                amqp_table_t t = rmq_headers_table((orig->_flags & AMQP_BASIC_HEADERS_FLAG) ? &orig->headers : NULL, h,
                                                   k, &pool);
                amqp_table_clone(&t, &out[i].props.headers, &pool);
        }
        struct sink_outcome *res = xcalloc(n ? n : 1, sizeof(*res));
        send_all(p, out, n, CONFIRM_TIMEOUT_MS, res);
        int rc = all_confirmed(res, n, err, errsz);
        free(res);
        empty_amqp_pool(&pool);
        free(out);
        return rc;
}

struct sink rmq_publisher_sink(struct rmq_publisher *p)
{
        return (struct sink){.publish = publish, .dead_letter = dead_letter, .opaque = p, .check = rmq_record_check};
}
