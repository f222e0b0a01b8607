/* source: the NATS JetStream source — one durable pull consumer per topic, messages handed over, each acknowledged after COMMIT. */
#include "source/nats/source.h"

#include "base/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "ops/metrics.h"
#include "source/nats/consumers.h"
#include "source/nats/pull.h"
#include "source/nats/settings.h"

/*
 * Acknowledgement: AckPolicy explicit, each committed message acknowledged
 * on its own. AckAll would take one ack per batch, but it also acknowledges
 * every lower sequence delivered to the consumer, including a delivery this
 * process never received (a pull reply lost in a reconnect): that message
 * would be gone. Explicit acks leave it pending; it comes back after
 * ack_wait, and the dedup table absorbs whatever comes back twice. For the
 * same reason the acks follow the batch's messages (done), not the
 * committed position: a lost delivery can come back below it.
 */

/* One topic: its pull subscription, what was fetched and not yet handed over. */
struct ntopic {
        struct nats_pull *pull; /* NULL: not pulled */
        char consumer[256];
        natsMsg **fetched; /* room for cap */
        int cap, count;    /* count: in fetched */
        int next;          /* the first of fetched not handed over */
        long held;         /* handed over, not yet given back */
        int paused;
};

struct nats_source {
        struct source base; /* first: a struct source * is a struct nats_source * */
        const struct config *cfg;
        struct nats_link *link;
        struct source_events ev;
        struct ntopic *topics;
        size_t turn; /* the topic the next fetch starts with */
        int ready;   /* every consumer in place, subscribed */
        int fatal;
        char fatal_msg[1024];
        char last_error[512];
        int64_t deadline_ms, retry_at;
        int startup_timeout_ms;
        struct log_ratelimit rl;
};

static struct nats_source *of(struct source *src) { return (struct nats_source *)src; }

/* ---- messages ---------------------------------------------------------------- */

static void msg_release(struct source *src, struct pl_msg *m)
{
        if (!m)
                return;
        of(src)->topics[m->topic_idx].held--;
        free(m->headers);
        natsMsg_Destroy(m->source); /* not acknowledged: the server delivers it again after ack_wait */
        free(m);
}

/* Every value of every header, as {header:NAME} sees them (the last of a name wins). */
static void wrap_headers(natsMsg *nm, struct pl_msg *m)
{
        const char **keys = NULL;
        int nk = 0;
        size_t cap = 0;
        if (natsMsgHeader_Keys(nm, &keys, &nk) != NATS_OK || nk <= 0)
                return;
        for (int i = 0; i < nk; i++) {
                const char **vals = NULL;
                int nv = 0;
                if (natsMsgHeader_Values(nm, keys[i], &vals, &nv) != NATS_OK)
                        continue;
                for (int j = 0; j < nv; j++) {
                        if (m->header_cnt == cap) {
                                cap = cap ? cap * 2 : 8;
                                m->headers = xrealloc(m->headers, cap * sizeof(*m->headers));
                        }
                        m->headers[m->header_cnt++] = (struct dedupd_header){keys[i], vals[j], strlen(vals[j])};
                }
                free((void *)vals);
        }
        free((void *)keys);
}

static struct pl_msg *msg_wrap(const struct config *cfg, natsMsg *nm, size_t t)
{
        jsMsgMetaData *meta = NULL;
        if (natsMsg_GetMetaData(&meta, nm) != NATS_OK) {
                log_error("nats", "a message on %s without JetStream metadata: not handed over",
                          natsMsg_GetSubject(nm));
                natsMsg_Destroy(nm);
                return NULL;
        }
        struct pl_msg *m = xcalloc(1, sizeof(*m));
        m->source = nm;
        m->topic_idx = t;
        m->topic = cfg->topics[t].name;
        m->partition = 0;
        m->offset = (int64_t)meta->Sequence.Stream;
        m->timestamp_ms = meta->Timestamp / 1000000;
        m->value = natsMsg_GetData(nm);
        m->value_len = (size_t)natsMsg_GetDataLength(nm);
        /* What the server still has for this consumer after this one: the lag gauge. */
        metrics_lag(m->topic, 0, (int64_t)meta->NumPending);
        if (meta->NumDelivered > 1)
                log_debug("nats", "%s: stream sequence %" PRIu64 " delivered again (%" PRIu64 " times)", m->topic,
                          meta->Sequence.Stream, meta->NumDelivered);
        jsMsgMetaData_Destroy(meta);
        wrap_headers(nm, m);
        return m;
}

/* ---- fetching ------------------------------------------------------------------ */

/* What was fetched and not handed over, dropped (never acknowledged: delivered again). */
static void drop_fetched(struct ntopic *nt)
{
        for (int i = nt->next; i < nt->count; i++)
                natsMsg_Destroy(nt->fetched[i]);
        nt->count = nt->next = 0;
}

/* Up to what the server lets this consumer hold, at most one batch. */
static void fetch(struct nats_source *n, size_t t, int timeout_ms)
{
        struct ntopic *nt = &n->topics[t];
        const struct topic_conf *tc = &n->cfg->topics[t];
        long room = (long)nats_conf(n->cfg)->max_ack_pending - nt->held;
        int want = room < tc->batch_max_messages ? (int)room : tc->batch_max_messages;
        if (want <= 0) {
                usleep((useconds_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000);
                return;
        }
        drop_fetched(nt);
        if (want > nt->cap) { /* the first fetch, or batch.max_messages reloaded larger */
                nt->fetched = xrealloc(nt->fetched, (size_t)want * sizeof(*nt->fetched));
                nt->cap = want;
        }
        int64_t t0 = log_now_ms();
        natsStatus s = nats_pull_fetch(nt->pull, nt->fetched, want, timeout_ms > 0 ? timeout_ms : 1, &nt->count);
        if (s == NATS_OK || s == NATS_TIMEOUT)
                return;
        nats_link_error(s, 0, n->last_error, sizeof(n->last_error));
        log_limited(&n->rl, 3, 10000, LOG_WARN, "nats", "fetching from consumer %s: %s", nt->consumer, n->last_error);
        /* Disconnected, it fails at once: do not spin. */
        int64_t left = timeout_ms - (log_now_ms() - t0);
        if (left > 0)
                usleep((useconds_t)left * 1000);
}

/* The next fetched message of topic t, handed over; NULL when none is there. */
static struct pl_msg *take(struct nats_source *n, size_t t)
{
        struct ntopic *nt = &n->topics[t];
        while (!nt->paused && nt->pull && nt->next < nt->count) {
                natsMsg *nm = nt->fetched[nt->next];
                nt->fetched[nt->next++] = NULL; /* the runner's now */
                struct pl_msg *m = msg_wrap(n->cfg, nm, t);
                if (m) {
                        nt->held++;
                        return m;
                }
        }
        return NULL;
}

/* ---- startup: the assignment ---------------------------------------------------- */

static int subscribe(struct nats_source *n, size_t t, char *err, size_t errsz)
{
        struct ntopic *nt = &n->topics[t];
        char why[512];
        /* The consumer exists (position): pulled, never created or deleted here. */
        natsStatus s = nats_pull_open(&nt->pull, n->link->nc, nats_conf(n->cfg)->stream, nt->consumer);
        if (s != NATS_OK) {
                snprintf(err, errsz, "pull subscription to consumer %s: %s", nt->consumer,
                         nats_link_error(s, 0, why, sizeof(why)));
                return -1;
        }
        return 0;
}

/* Topic t's consumer put at start (the database's position, or
 * SOURCE_START_BROKER: after its acknowledged floor) and subscribed to. */
static int position(struct nats_source *n, size_t t, int64_t start, char *err, size_t errsz)
{
        if (nats_consumer_ensure(n->link, n->cfg, t, start, err, errsz) != NATS_CHECK_OK)
                return -1;
        return subscribe(n, t, err, errsz);
}

/* Topic t neither pulls nor holds anything fetched: its subscription gone
 * (the durable consumer stays), what it fetched and did not hand over
 * dropped (never acknowledged: delivered again). */
static void unsubscribe(struct ntopic *nt)
{
        drop_fetched(nt);
        nats_pull_close(nt->pull);
        nt->pull = NULL;
}

/* Every topic's consumer at the database's position, then pulled; one whose
 * position the database could not say yet (SOURCE_START_LATER) is neither
 * moved nor pulled until the runner seeks it. */
static int settle(struct nats_source *n, char *err, size_t errsz)
{
        size_t cnt = n->cfg->topic_cnt;
        struct pl_part parts[cnt];
        int64_t start[cnt];
        for (size_t t = 0; t < cnt; t++) {
                parts[t] = (struct pl_part){t, 0};
                start[t] = -1;
        }
        if (nats_stream_lookup(n->link, n->cfg, NULL, err, errsz) != NATS_CHECK_OK)
                return -1;
        n->ev.assigned(n->ev.opaque, parts, cnt, start);
        for (size_t t = 0; t < cnt; t++) {
                if (start[t] != SOURCE_START_LATER && position(n, t, start[t], err, errsz)) {
                        n->ev.revoked(n->ev.opaque, NULL, 0);
                        for (size_t k = 0; k < t; k++)
                                unsubscribe(&n->topics[k]);
                        return -1;
                }
        }
        n->ready = 1;
        n->ev.settled(n->ev.opaque);
        log_info("nats", "consuming %zu subject(s) of stream %s on %s", cnt, nats_conf(n->cfg)->stream,
                 n->link->server);
        return 0;
}

static void check_startup(struct nats_source *n)
{
        if (n->ready || n->fatal || !n->deadline_ms || log_now_ms() < n->deadline_ms)
                return;
        snprintf(n->fatal_msg, sizeof(n->fatal_msg),
                 "startup: the consumers of stream %s were not in place within %d ms (startup_timeout_ms) on "
                 "%s (nats.url): %s",
                 nats_conf(n->cfg)->stream, n->startup_timeout_ms, n->link->server,
                 n->last_error[0] ? n->last_error : "no answer");
        n->fatal = 1;
}

/* ---- the source ------------------------------------------------------------------- */

static struct pl_msg *poll_one(struct source *src, int timeout_ms)
{
        struct nats_source *n = of(src);
        size_t cnt = n->cfg->topic_cnt;
        if (!n->ready) {
                if (log_now_ms() < n->retry_at || settle(n, n->last_error, sizeof(n->last_error))) {
                        if (n->last_error[0])
                                log_limited(&n->rl, 1, 10000, LOG_WARN, "nats", "%s (retrying)", n->last_error);
                        n->retry_at = log_now_ms() + 1000;
                        usleep((useconds_t)(timeout_ms > 0 ? (timeout_ms < 100 ? timeout_ms : 100) : 1) * 1000);
                        return NULL;
                }
        }
        for (size_t i = 0; i < cnt; i++) { /* what is already here first */
                struct pl_msg *m = take(n, (n->turn + i) % cnt);
                if (m)
                        return m;
        }
        size_t active = 0;
        for (size_t t = 0; t < cnt; t++)
                active += !n->topics[t].paused && n->topics[t].pull;
        if (!active) {
                usleep((useconds_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000);
                return NULL;
        }
        /* Each fetching topic gets its share of the wait, in turn. */
        int share = timeout_ms / (int)active;
        for (size_t i = 0; i < cnt; i++) {
                size_t t = (n->turn + i) % cnt;
                if (n->topics[t].paused || !n->topics[t].pull)
                        continue;
                fetch(n, t, share);
                struct pl_msg *m = take(n, t);
                if (m) {
                        n->turn = (t + 1) % cnt;
                        return m;
                }
        }
        return NULL;
}

/* Positions say nothing here: a message below a committed sequence may
 * still be on its way (delivered again after a lost delivery). */
static void ack(struct source *src, const struct pl_commit *commits, size_t n)
{
        (void)src;
        (void)commits;
        (void)n;
}

/* After COMMIT: exactly the batch's messages, each on its own. */
static void done(struct source *src, struct pl_msg *const *msgs, size_t n)
{
        struct nats_source *s = of(src);
        for (size_t i = 0; i < n; i++) {
                natsStatus st = nats_pull_ack(s->link->nc, msgs[i]->source);
                /* Lost, it is delivered again after ack_wait: absorbed. */
                if (st != NATS_OK)
                        log_limited(&s->rl, 3, 10000, LOG_WARN, "nats", "ack of %s sequence %" PRId64 ": %s",
                                    msgs[i]->topic, msgs[i]->offset, natsStatus_GetText(st));
        }
}

static void pause_parts(struct source *src, const struct pl_part *parts, size_t n, int pause)
{
        for (size_t i = 0; i < n; i++)
                of(src)->topics[parts[i].topic_idx].paused = pause;
}

/* The runner re-positions topics (the database it reconnected to may be a
 * promoted replica that lost the last commits): each consumer is moved back
 * to the database's position, as at the start, and pulled again. */
static int seek_parts(struct source *src, const struct pl_part *parts, const int64_t *start, size_t cnt, char *err,
                      size_t errsz)
{
        struct nats_source *n = of(src);
        for (size_t i = 0; i < cnt; i++) {
                size_t t = parts[i].topic_idx;
                unsubscribe(&n->topics[t]);
                if (position(n, t, start[i], err, errsz))
                        return -1; /* unsubscribed: not pulled until a seek succeeds */
        }
        return 0;
}

static const char *failure(struct source *src)
{
        check_startup(of(src));
        return of(src)->fatal ? of(src)->fatal_msg : NULL;
}

/* The acks on their way out; the consumers stay (durable), for the next start. */
static void close_source(struct source *src)
{
        struct nats_source *n = of(src);
        natsStatus s;
        if (n->link->nc && (s = natsConnection_FlushTimeout(n->link->nc, 5000)) != NATS_OK)
                log_warn("nats", "flushing the last acks: %s (those messages are delivered again, absorbed)",
                         natsStatus_GetText(s));
}

static void destroy(struct source *src)
{
        struct nats_source *n = of(src);
        for (size_t t = 0; t < n->cfg->topic_cnt; t++) {
                struct ntopic *nt = &n->topics[t];
                unsubscribe(nt);
                free(nt->fetched);
        }
        free(n->topics);
        log_ratelimit_flush(&n->rl);
        free(n);
}

static int connected(struct source *src, char *why, size_t whysz)
{
        struct nats_source *n = of(src);
        natsConnStatus st = n->link->nc ? natsConnection_Status(n->link->nc) : NATS_CONN_STATUS_CLOSED;
        if (st == NATS_CONN_STATUS_CONNECTED)
                return 1;
        snprintf(why, whysz, "NATS: not connected to %s (%s)", n->link->server,
                 st == NATS_CONN_STATUS_RECONNECTING ? "reconnecting" : "disconnected");
        return 0;
}

static const struct source_ops nats_ops = {
        .poll = poll_one,
        .release = msg_release,
        .ack = ack,
        .done = done,
        .pause = pause_parts,
        .seek = seek_parts,
        .failure = failure,
        .close = close_source,
        .destroy = destroy,
        .connected = connected,
};

void nats_source_set_startup_deadline(struct source *src, int64_t deadline_ms, int timeout_ms)
{
        of(src)->deadline_ms = deadline_ms;
        of(src)->startup_timeout_ms = timeout_ms;
}

struct source *nats_source_new(const struct config *cfg, struct nats_link *link, struct source_events ev, char *err,
                               size_t errsz)
{
        struct nats_source *n = xcalloc(1, sizeof(*n));
        (void)err;
        (void)errsz;
        n->base.ops = &nats_ops;
        n->cfg = cfg;
        n->link = link;
        n->ev = ev;
        n->topics = xcalloc(cfg->topic_cnt ? cfg->topic_cnt : 1, sizeof(*n->topics));
        for (size_t t = 0; t < cfg->topic_cnt; t++)
                nats_consumer_name(cfg, t, n->topics[t].consumer, sizeof(n->topics[t].consumer));
        return &n->base;
}
