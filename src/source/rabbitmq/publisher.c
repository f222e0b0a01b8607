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
#include "source/rabbitmq/headers.h"

#define PUB_CHANNEL 1
#define CONFIRM_TIMEOUT_MS 15000

struct rmq_publisher {
        const struct config *cfg;
        amqp_connection_state_t conn; /* NULL: connect on next use */
        uint64_t next_tag;            /* publish sequence number of the next message */
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
        free(p);
}

void rmq_publisher_attach(struct rmq_publisher *p, struct source *src) { p->src = src; }

static void drop(struct rmq_publisher *p)
{
        if (p->conn)
                amqp_destroy_connection(p->conn);
        p->conn = NULL;
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

/* A method frame while waiting for confirms; -1 ends the wait with err. */
static int on_method(struct rmq_publisher *p, const amqp_frame_t *f, uint64_t first, unsigned char *done, size_t n,
                     int *returned, char *err, size_t errsz)
{
        char a[256], b[256], c[256];
        switch (f->payload.method.id) {
        case AMQP_BASIC_ACK_METHOD: {
                const amqp_basic_ack_t *k = f->payload.method.decoded;
                for (uint64_t tag = k->multiple ? first : k->delivery_tag; tag <= k->delivery_tag; tag++)
                        if (tag >= first && tag < first + n)
                                done[tag - first] = 1;
                return 0;
        }
        case AMQP_BASIC_NACK_METHOD:
                snprintf(err, errsz, "the broker refused a message (basic.nack)");
                return -1;
        case AMQP_BASIC_RETURN_METHOD: {
                const amqp_basic_return_t *r = f->payload.method.decoded;
                if (!*returned)
                        snprintf(err, errsz, "exchange '%s' routed a message with routing key '%s' to no queue: %u %s",
                                 rmq_str(r->exchange, a, sizeof(a)), rmq_str(r->routing_key, b, sizeof(b)),
                                 r->reply_code, rmq_str(r->reply_text, c, sizeof(c)));
                *returned = 1;
                return 0;
        }
        case AMQP_CHANNEL_CLOSE_METHOD: {
                const amqp_channel_close_t *k = f->payload.method.decoded;
                snprintf(err, errsz, "the broker closed the publishing channel: %u %s", k->reply_code,
                         rmq_str(k->reply_text, a, sizeof(a)));
                drop(p);
                return -1;
        }
        case AMQP_CONNECTION_CLOSE_METHOD: {
                const amqp_connection_close_t *k = f->payload.method.decoded;
                snprintf(err, errsz, "the broker closed the publishing connection: %u %s", k->reply_code,
                         rmq_str(k->reply_text, a, sizeof(a)));
                drop(p);
                return -1;
        }
        default:
                return 0;
        }
}

static int all_done(const unsigned char *done, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!done[i])
                        return 0;
        return 1;
}

/* Until every message from first on is confirmed (or one is refused). */
static int wait_confirms(struct rmq_publisher *p, uint64_t first, size_t n, char *err, size_t errsz)
{
        unsigned char *done = xcalloc(n ? n : 1, 1);
        int64_t deadline = log_now_ms() + CONFIRM_TIMEOUT_MS;
        int returned = 0, rc = -1;
        while (!all_done(done, n)) {
                int64_t left = deadline - log_now_ms();
                struct timeval tv = {left > 0 ? left / 1000 : 0, left > 0 ? (left % 1000) * 1000 : 0};
                amqp_frame_t f;
                if (left <= 0) {
                        snprintf(err, errsz, "no confirm from the broker within %d ms", CONFIRM_TIMEOUT_MS);
                        drop(p);
                        goto out;
                }
                int st = amqp_simple_wait_frame_noblock(p->conn, &f, &tv);
                if (st == AMQP_STATUS_TIMEOUT)
                        continue;
                if (st != AMQP_STATUS_OK) {
                        snprintf(err, errsz, "waiting for confirms: %s", amqp_error_string2(st));
                        drop(p);
                        goto out;
                }
                if (f.frame_type == AMQP_FRAME_METHOD && on_method(p, &f, first, done, n, &returned, err, errsz))
                        goto out;
        }
        rc = returned ? -1 : 0;
out:
        if (p->conn)
                amqp_maybe_release_buffers(p->conn);
        free(done);
        return rc;
}

static int send_all(struct rmq_publisher *p, const struct outgoing *out, size_t n, char *err, size_t errsz)
{
        char target[300];
        if (ensure(p, err, errsz))
                return -1;
        uint64_t first = p->next_tag;
        for (size_t i = 0; i < n; i++) {
                int st = amqp_basic_publish(p->conn, PUB_CHANNEL, out[i].exchange, out[i].routing_key,
                                            1 /* mandatory */, 0, &out[i].props, out[i].body);
                if (st != AMQP_STATUS_OK) {
                        snprintf(err, errsz, "publishing to %s: %s", rmq_target(p->cfg, target, sizeof(target)),
                                 amqp_error_string2(st));
                        drop(p);
                        return -1;
                }
                p->next_tag++;
        }
        return wait_confirms(p, first, n, err, errsz);
}

static amqp_bytes_t bytes_of(const void *v, size_t len)
{
        return (amqp_bytes_t){len, (void *)(v ? v : "")};
}

static int publish(void *opaque, const struct record *recs, size_t n, char *err, size_t errsz)
{
        struct rmq_publisher *p = opaque;
        struct outgoing *out = xcalloc(n ? n : 1, sizeof(*out));
        amqp_pool_t pool;
        init_amqp_pool(&pool, 4096);
        for (size_t i = 0; i < n; i++) {
                out[i].exchange = amqp_cstring_bytes(recs[i].topic);
                out[i].routing_key = bytes_of(recs[i].key, recs[i].key ? recs[i].key_len : 0);
                out[i].body = bytes_of(recs[i].value, recs[i].value ? recs[i].value_len : 0);
                out[i].props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_HEADERS_FLAG;
                out[i].props.delivery_mode = 2; /* persistent */
                out[i].props.headers = rmq_headers_table(NULL, recs[i].headers, recs[i].header_cnt, &pool);
        }
        int rc = send_all(p, out, n, err, errsz);
        empty_amqp_pool(&pool);
        free(out);
        return rc;
}

/* ---- dead letters ---------------------------------------------------------- */

#define OWN_HEADERS 10

/* dedupd's own headers, the same as on Kafka: why, from where, which key. */
static size_t own_headers(struct dedupd_header *h, char nums[3][24], const struct pl_msg *m, const char *ns)
{
        size_t n = 0;
        snprintf(nums[0], sizeof(nums[0]), "%" PRId32, m->partition);
        snprintf(nums[1], sizeof(nums[1]), "%" PRId64, m->offset);
        snprintf(nums[2], sizeof(nums[2]), "%" PRId64, m->timestamp_ms);
#define HDR(n_, v_) (h[n++] = (struct dedupd_header){(n_), (v_), strlen(v_)})
        HDR("dedupd.reason", m->dlq_reason ? m->dlq_reason : "unknown");
        HDR("dedupd.origin.topic", m->topic);
        HDR("dedupd.origin.partition", nums[0]);
        HDR("dedupd.origin.offset", nums[1]);
        HDR("dedupd.origin.timestamp", nums[2]);
        HDR("dedupd.namespace", ns);
        if (m->idem_key)
                HDR("dedupd.key", m->idem_key);
        if (m->fingerprint[0])
                HDR("dedupd.fingerprint.message", m->fingerprint);
        if (m->stored_fingerprint[0])
                HDR("dedupd.fingerprint.stored", m->stored_fingerprint);
#undef HDR
        return n;
}

static int reject_all(struct rmq_publisher *p, struct pl_msg *const *msgs, size_t n, char *err, size_t errsz)
{
        for (size_t i = 0; i < n; i++)
                if (!p->src || rmq_source_reject(p->src, msgs[i], err, errsz))
                        return -1;
        return 0;
}

static int dead_letter(void *opaque, const char *dlq_topic, const char *ns, struct pl_msg *const *msgs, size_t n,
                       char *err, size_t errsz)
{
        struct rmq_publisher *p = opaque;
        if (!*p->cfg->rmq_dlx)
                return reject_all(p, msgs, n, err, errsz);
        struct outgoing *out = xcalloc(n ? n : 1, sizeof(*out));
        struct dedupd_header h[OWN_HEADERS];
        char nums[3][24];
        amqp_pool_t pool;
        init_amqp_pool(&pool, 4096);
        for (size_t i = 0; i < n; i++) {
                const amqp_envelope_t *env = rmq_source_envelope(msgs[i]);
                const amqp_basic_properties_t *orig = &env->message.properties;
                size_t k = own_headers(h, nums, msgs[i], ns);
                out[i].exchange = amqp_cstring_bytes(p->cfg->rmq_dlx);
                out[i].routing_key = amqp_cstring_bytes(dlq_topic);
                out[i].body = env->message.body;
                out[i].props = *orig;
                out[i].props._flags |= AMQP_BASIC_HEADERS_FLAG;
                /* The table points at h and nums: copied into the pool now. */
                amqp_table_t t = rmq_headers_table((orig->_flags & AMQP_BASIC_HEADERS_FLAG) ? &orig->headers : NULL,
                                                   h, k, &pool);
                amqp_table_clone(&t, &out[i].props.headers, &pool);
        }
        int rc = send_all(p, out, n, err, errsz);
        empty_amqp_pool(&pool);
        free(out);
        return rc;
}

struct sink rmq_publisher_sink(struct rmq_publisher *p)
{
        return (struct sink){.publish = publish, .dead_letter = dead_letter, .opaque = p, .check = rmq_record_check};
}
