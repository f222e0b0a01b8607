/* consumer: the RabbitMQ source — one channel per queue, manual acks after COMMIT, deliveries numbered per queue, reconnection after a loss. */
#include "source/rabbitmq/consumer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <amqp.h>

#include "base/log.h"
#include "base/mem.h"
#include "source/rabbitmq/connection.h"
#include "source/rabbitmq/headers.h"
#include "source/rabbitmq/settings.h"

/*
 * A delivery tag counts deliveries on a channel, and basic.ack multiple=true
 * acknowledges every one up to a tag: so each queue gets its own channel
 * (topic i on channel i + 1), and a batch of one queue never acknowledges
 * another's. The offset the protocol sees is base + tag - 1, base being the
 * database's next offset when the channel opened: acknowledging up to
 * next_offset is acknowledging up to tag next_offset - base.
 */
struct rmq_queue {
        int64_t base;       /* offset of delivery tag 1 */
        uint64_t acked;     /* highest tag acknowledged */
        uint64_t delivered; /* highest tag delivered */
        uint64_t *rejected; /* tags rejected (dead-lettered) above acked, ascending */
        size_t rej_cnt, rej_cap;
};

struct rmq_source {
        struct source base; /* first: a struct source * is a struct rmq_source * */
        const struct config *cfg;
        struct source_events ev;
        amqp_connection_state_t conn; /* NULL: not connected */
        struct rmq_queue *q;          /* one per topic */
        unsigned generation;          /* connections so far: a delivery's tag is valid in its own only */
        int assigned;                 /* the runner was told of the queues */
        int revoke_pending;           /* lost outside poll: the runner hears it at the next */
        int64_t retry_at;
        int backoff_ms;
        int fatal;
        char fatal_msg[1024];
        char last_error[512];
        struct log_ratelimit rl;
        int64_t deadline_ms;
        int startup_timeout_ms;
};

/* A delivery as handed over; the pl_msg first. */
struct rmq_msg {
        struct pl_msg m;
        amqp_envelope_t env;
        struct rmq_strings keep;
        unsigned generation;
};

static struct rmq_source *of(struct source *src) { return (struct rmq_source *)src; }

static amqp_channel_t channel_of(size_t topic_idx) { return (amqp_channel_t)(topic_idx + 1); }

/* ---- connection ----------------------------------------------------------- */

/* The connection is gone: what is buffered was never acknowledged and comes
 * back redelivered (the dedup table absorbs it). The runner is told from
 * inside poll only (an ack fails in the middle of its batch). */
static void lost(struct rmq_source *s, const char *why)
{
        char target[300];
        snprintf(s->last_error, sizeof(s->last_error), "%s", why);
        log_limited(&s->rl, 3, 10000, LOG_WARN, "rabbitmq", "connection to %s lost: %s; reconnecting",
                    rmq_target(s->cfg, target, sizeof(target)), why);
        if (s->conn)
                amqp_destroy_connection(s->conn); /* no close handshake with a broken peer */
        s->conn = NULL;
        s->revoke_pending = s->assigned;
        s->assigned = 0;
        s->retry_at = log_now_ms() + s->backoff_ms;
}

static void serve_revoke(struct rmq_source *s)
{
        if (!s->revoke_pending)
                return;
        s->revoke_pending = 0;
        s->ev.revoked(s->ev.opaque, NULL, 0);
}

/* Each queue on its own channel: it exists (passive declare), and at most
 * prefetch deliveries are unacknowledged at once. */
static int open_queues(struct rmq_source *s, char *err, size_t errsz)
{
        for (size_t t = 0; t < s->cfg->topic_cnt; t++) {
                const char *name = s->cfg->topics[t].name;
                amqp_channel_t ch = channel_of(t);
                char what[300];
                int code;
                if (rmq_channel_open(s->conn, ch, err, errsz))
                        return -1;
                amqp_queue_declare(s->conn, ch, amqp_cstring_bytes(name), 1, 0, 0, 0, amqp_empty_table);
                snprintf(what, sizeof(what), "queue %s (passive queue.declare)", name);
                if (rmq_check(s->conn, what, &code, err, errsz)) {
                        if (code == AMQP_NOT_FOUND) {
                                snprintf(s->fatal_msg, sizeof(s->fatal_msg), "queue %s does not exist (any more)",
                                         name);
                                s->fatal = 1;
                        }
                        return -1;
                }
                amqp_basic_qos(s->conn, ch, 0, (uint16_t)rmq_conf(s->cfg)->prefetch, 0);
                if (rmq_check(s->conn, "basic.qos", NULL, err, errsz))
                        return -1;
        }
        return 0;
}

/* The runner says where each queue's numbering starts (the database). */
static void assign(struct rmq_source *s)
{
        size_t n = s->cfg->topic_cnt;
        struct pl_part parts[n ? n : 1];
        int64_t start[n ? n : 1];
        for (size_t t = 0; t < n; t++) {
                parts[t] = (struct pl_part){t, 0};
                start[t] = -1;
        }
        s->ev.assigned(s->ev.opaque, parts, n, start);
        for (size_t t = 0; t < n; t++) {
                struct rmq_queue *q = &s->q[t];
                q->base = start[t] >= 0 ? start[t] : 0;
                q->acked = q->delivered = 0;
                q->rej_cnt = 0;
        }
        s->assigned = 1;
}

static int consume_all(struct rmq_source *s, char *err, size_t errsz)
{
        char tag[200];
        snprintf(tag, sizeof(tag), "dedupd-%s-%d", s->cfg->namespace, (int)getpid());
        for (size_t t = 0; t < s->cfg->topic_cnt; t++) {
                amqp_basic_consume(s->conn, channel_of(t), amqp_cstring_bytes(s->cfg->topics[t].name),
                                   amqp_cstring_bytes(tag), 0, 0 /* manual acks */, 0, amqp_empty_table);
                if (rmq_check(s->conn, "basic.consume", NULL, err, errsz))
                        return -1;
        }
        return 0;
}

static void connect_now(struct rmq_source *s)
{
        char err[768], target[300];
        int fresh = s->generation == 0;
        if (!(s->conn = rmq_connect(s->cfg, rmq_conf(s->cfg)->heartbeat_s, err, sizeof(err))) ||
            open_queues(s, err, sizeof(err))) {
                snprintf(s->last_error, sizeof(s->last_error), "%s", err);
                log_limited(&s->rl, 3, 10000, LOG_WARN, "rabbitmq", "cannot connect: %s (retrying)", err);
                if (s->conn)
                        amqp_destroy_connection(s->conn);
                s->conn = NULL;
                s->retry_at = log_now_ms() + s->backoff_ms;
                s->backoff_ms = s->backoff_ms * 2 > rmq_conf(s->cfg)->reconnect_max_ms
                                        ? rmq_conf(s->cfg)->reconnect_max_ms
                                        : s->backoff_ms * 2;
                return;
        }
        s->generation++;
        assign(s);
        if (consume_all(s, err, sizeof(err))) {
                lost(s, err);
                serve_revoke(s);
                return;
        }
        log_ratelimit_flush(&s->rl);
        s->backoff_ms = 100;
        log_info("rabbitmq", "%s %s: consuming %zu queue(s), prefetch %d", fresh ? "connected to" : "reconnected to",
                 rmq_target(s->cfg, target, sizeof(target)), s->cfg->topic_cnt, rmq_conf(s->cfg)->prefetch);
        s->ev.settled(s->ev.opaque);
}

/* ---- messages ------------------------------------------------------------- */

static void msg_release(struct source *src, struct pl_msg *m)
{
        (void)src;
        if (!m)
                return;
        struct rmq_msg *rm = (struct rmq_msg *)m;
        free(m->headers);
        free(m->props);
        rmq_strings_free(&rm->keep);
        amqp_destroy_envelope(&rm->env);
        free(rm);
}

static int64_t wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct pl_msg *wrap(struct rmq_source *s, struct rmq_msg *rm)
{
        const amqp_basic_properties_t *p = &rm->env.message.properties;
        size_t t = (size_t)rm->env.channel - 1;
        struct pl_msg *m = &rm->m;
        struct rmq_queue *q = &s->q[t];

        rm->generation = s->generation;
        q->delivered = rm->env.delivery_tag;
        m->source = rm;
        m->topic_idx = t;
        m->topic = s->cfg->topics[t].name;
        m->partition = 0;
        m->offset = q->base + (int64_t)rm->env.delivery_tag - 1;
        m->timestamp_ms = (p->_flags & AMQP_BASIC_TIMESTAMP_FLAG) ? (int64_t)p->timestamp * 1000 : wall_ms();
        m->value = rm->env.message.body.bytes;
        m->value_len = rm->env.message.body.len;
        if (p->_flags & AMQP_BASIC_HEADERS_FLAG)
                m->header_cnt = rmq_headers_read(&p->headers, &m->headers, &rm->keep);
        m->prop_cnt = rmq_props_read(p, &m->props, &rm->keep);
        return m;
}

/* Something else than a delivery came: a channel or the connection closed
 * by the broker, or a consumer cancelled (the queue was deleted). */
static void other_frame(struct rmq_source *s)
{
        amqp_frame_t f;
        char why[600], text[256];
        int st = amqp_simple_wait_frame(s->conn, &f);
        if (st != AMQP_STATUS_OK) {
                lost(s, amqp_error_string2(st));
                return;
        }
        if (f.frame_type != AMQP_FRAME_METHOD)
                return;
        switch (f.payload.method.id) {
        case AMQP_CHANNEL_CLOSE_METHOD: {
                const amqp_channel_close_t *c = f.payload.method.decoded;
                snprintf(why, sizeof(why), "the broker closed the channel of queue %s: %u %s",
                         f.channel >= 1 && f.channel <= s->cfg->topic_cnt ? s->cfg->topics[f.channel - 1].name : "?",
                         c->reply_code, rmq_str(c->reply_text, text, sizeof(text)));
                lost(s, why);
                break;
        }
        case AMQP_CONNECTION_CLOSE_METHOD: {
                const amqp_connection_close_t *c = f.payload.method.decoded;
                snprintf(why, sizeof(why), "the broker closed the connection: %u %s", c->reply_code,
                         rmq_str(c->reply_text, text, sizeof(text)));
                lost(s, why);
                break;
        }
        case AMQP_BASIC_CANCEL_METHOD: lost(s, "the broker cancelled the consumer (was the queue deleted?)"); break;
        default: break;
        }
}

static void wait_ms(int ms)
{
        if (ms > 0)
                usleep((useconds_t)ms * 1000);
}

static struct pl_msg *poll_one(struct source *src, int timeout_ms)
{
        struct rmq_source *s = of(src);
        serve_revoke(s);
        if (s->fatal)
                return NULL;
        if (!s->conn) {
                int64_t now = log_now_ms();
                if (now >= s->retry_at)
                        connect_now(s);
                if (!s->conn) {
                        int64_t left = s->retry_at - log_now_ms();
                        wait_ms(left < timeout_ms ? (int)left : timeout_ms);
                        return NULL;
                }
        }
        amqp_maybe_release_buffers(s->conn);
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        struct rmq_msg *rm = xcalloc(1, sizeof(*rm));
        amqp_rpc_reply_t r = amqp_consume_message(s->conn, &rm->env, &tv, 0);
        if (r.reply_type == AMQP_RESPONSE_NORMAL) {
                if (rm->env.channel >= 1 && rm->env.channel <= s->cfg->topic_cnt)
                        return wrap(s, rm);
                log_error("rabbitmq", "a delivery on channel %u, which consumes no configured queue", rm->env.channel);
                amqp_destroy_envelope(&rm->env);
        }
        free(rm);
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT)
                return NULL;
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
                other_frame(s);
                return NULL;
        }
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
                char why[600];
                rmq_reply(r, "consuming", NULL, why, sizeof(why));
                lost(s, why);
        }
        return NULL;
}

/* ---- acknowledgements ------------------------------------------------------- */

static int topic_of(const struct config *cfg, const char *name)
{
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                if (!strcmp(cfg->topics[i].name, name))
                        return (int)i;
        return -1;
}

static int was_rejected(const struct rmq_queue *q, uint64_t tag)
{
        for (size_t i = 0; i < q->rej_cnt; i++)
                if (q->rejected[i] == tag)
                        return 1;
        return 0;
}

/* Acknowledge everything of queue t up to tag: basic.ack multiple=true with
 * the highest tag still unacknowledged (a rejected one is no longer). */
static void ack_upto(struct rmq_source *s, size_t t, uint64_t tag)
{
        struct rmq_queue *q = &s->q[t];
        uint64_t target = tag;
        while (target > q->acked && was_rejected(q, target))
                target--;
        if (target > q->acked) {
                int st = amqp_basic_ack(s->conn, channel_of(t), target, 1);
                if (st != AMQP_STATUS_OK) {
                        lost(s, amqp_error_string2(st));
                        return;
                }
        }
        q->acked = tag;
        size_t keep = 0;
        for (size_t i = 0; i < q->rej_cnt; i++)
                if (q->rejected[i] > tag)
                        q->rejected[keep++] = q->rejected[i];
        q->rej_cnt = keep;
}

static void ack(struct source *src, const struct pl_commit *commits, size_t n)
{
        struct rmq_source *s = of(src);
        for (size_t i = 0; i < n && s->conn; i++) {
                int t = topic_of(s->cfg, commits[i].topic);
                if (t < 0)
                        continue;
                struct rmq_queue *q = &s->q[t];
                int64_t tag = commits[i].next_offset - q->base;
                /* A commit of deliveries of an earlier connection: those come back anyway. */
                if (tag <= 0 || (uint64_t)tag <= q->acked || (uint64_t)tag > q->delivered)
                        continue;
                ack_upto(s, (size_t)t, (uint64_t)tag);
        }
}

int rmq_source_reject(struct source *src, const struct pl_msg *m, char *err, size_t errsz)
{
        struct rmq_source *s = of(src);
        const struct rmq_msg *rm = (const struct rmq_msg *)m;
        struct rmq_queue *q = &s->q[m->topic_idx];
        if (!s->conn || rm->generation != s->generation) {
                snprintf(err, errsz, "the connection it was delivered on is gone (it will be redelivered)");
                return -1;
        }
        int st = amqp_basic_reject(s->conn, channel_of(m->topic_idx), rm->env.delivery_tag, 0 /* requeue */);
        if (st != AMQP_STATUS_OK) {
                snprintf(err, errsz, "basic.reject: %s", amqp_error_string2(st));
                return -1;
        }
        if (q->rej_cnt == q->rej_cap) {
                q->rej_cap = q->rej_cap ? q->rej_cap * 2 : 16;
                q->rejected = xrealloc(q->rejected, q->rej_cap * sizeof(*q->rejected));
        }
        q->rejected[q->rej_cnt++] = rm->env.delivery_tag;
        return 0;
}

const void *rmq_source_envelope(const struct pl_msg *m) { return &((const struct rmq_msg *)m)->env; }

/* Nothing to pause: at most prefetch deliveries per queue are
 * unacknowledged, so a queue whose batch waits stops receiving by itself. */
static void pause_parts(struct source *src, const struct pl_part *parts, size_t n, int pause)
{
        (void)src;
        (void)parts;
        (void)n;
        (void)pause;
}

/* ---- life ----------------------------------------------------------------------- */

void rmq_source_set_startup_deadline(struct source *src, int64_t deadline_ms, int timeout_ms)
{
        of(src)->deadline_ms = deadline_ms;
        of(src)->startup_timeout_ms = timeout_ms;
}

static const char *failure(struct source *src)
{
        struct rmq_source *s = of(src);
        if (!s->fatal && !s->generation && s->deadline_ms && log_now_ms() >= s->deadline_ms) {
                char target[300];
                snprintf(s->fatal_msg, sizeof(s->fatal_msg),
                         "startup: no connection to RabbitMQ at %s within %d ms (startup_timeout_ms): %s",
                         rmq_target(s->cfg, target, sizeof(target)), s->startup_timeout_ms,
                         s->last_error[0] ? s->last_error : "no error reported");
                s->fatal = 1;
        }
        return s->fatal ? s->fatal_msg : NULL;
}

/* Unacknowledged deliveries go back to their queues when the connection closes. */
static void close_source(struct source *src)
{
        struct rmq_source *s = of(src);
        rmq_disconnect(s->conn);
        s->conn = NULL;
}

static void destroy(struct source *src)
{
        struct rmq_source *s = of(src);
        if (s->conn)
                amqp_destroy_connection(s->conn);
        for (size_t t = 0; t < s->cfg->topic_cnt; t++)
                free(s->q[t].rejected);
        free(s->q);
        log_ratelimit_flush(&s->rl);
        free(s);
}

static int connected(struct source *src, char *why, size_t whysz)
{
        struct rmq_source *s = of(src);
        char target[300];
        if (s->conn)
                return 1;
        snprintf(why, whysz, "RabbitMQ: not connected to %s (reconnecting)%s%s",
                 rmq_target(s->cfg, target, sizeof(target)), s->last_error[0] ? ": " : "", s->last_error);
        return 0;
}

static const struct source_ops rmq_ops = {
        .poll = poll_one,
        .release = msg_release,
        .ack = ack,
        .pause = pause_parts,
        .seek = NULL, /* a queue cannot rewind: what it acknowledged is gone */
        .failure = failure,
        .close = close_source,
        .destroy = destroy,
        .connected = connected,
};

struct source *rmq_source_new(const struct config *cfg, struct source_events ev)
{
        struct rmq_source *s = xcalloc(1, sizeof(*s));
        s->base.ops = &rmq_ops;
        s->cfg = cfg;
        s->ev = ev;
        s->q = xcalloc(cfg->topic_cnt ? cfg->topic_cnt : 1, sizeof(*s->q));
        s->backoff_ms = 100;
        return &s->base;
}
