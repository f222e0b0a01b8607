/* pull: a durable pull consumer fetched by hand — pull requests, their replies on an inbox of its own, acks on each message's reply subject. */
#include "source/nats/pull.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"

/*
 * Why not js_PullSubscribe and natsSubscription_Fetch: before nats.c 3.10
 * (Debian ships 3.4.1) Fetch overflows its own array of messages when
 * messages of an earlier pull request are still queued on the subscription
 * and it takes more than half a batch of them first (nats-io/nats.c #749,
 * fixed upstream in 3.10.0). That is what happens when nats-server comes
 * back: the pull requests the client buffered while it was away are answered
 * at once, and dedupd crashed with a heap overflow (or a double free) under
 * the next fetch. Here the array is the caller's and never written past
 * batch: what earlier requests brought stays queued until it is taken.
 * The protocol is JetStream's own: a request on
 * $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer> with the inbox as reply
 * subject; the stream's messages come with a $JS.ACK. reply subject, the
 * server's word on a request (404 no messages, 408 expired, 409) without.
 */

#define JS_ACK_PREFIX "$JS.ACK."

struct nats_pull {
        natsConnection *nc;
        natsSubscription *sub;
        char *inbox;
        char *next; /* the subject pull requests go to */
};

natsStatus nats_pull_open(struct nats_pull **out, natsConnection *nc, const char *stream, const char *consumer)
{
        struct nats_pull *p = xcalloc(1, sizeof(*p));
        natsInbox *inbox = NULL;
        p->nc = nc;
        p->next = xasprintf("$JS.API.CONSUMER.MSG.NEXT.%s.%s", stream, consumer);
        natsStatus s = natsInbox_Create(&inbox);
        if (s == NATS_OK) {
                p->inbox = xstrdup(inbox);
                natsInbox_Destroy(inbox);
                s = natsConnection_SubscribeSync(&p->sub, nc, p->inbox);
        }
        /* No limit of its own: the consumer's max_ack_pending bounds what comes. */
        if (s == NATS_OK)
                s = natsSubscription_SetPendingLimits(p->sub, -1, -1);
        if (s != NATS_OK) {
                nats_pull_close(p);
                return s;
        }
        *out = p;
        return NATS_OK;
}

void nats_pull_close(struct nats_pull *p)
{
        if (!p)
                return;
        if (p->sub) {
                (void)natsSubscription_Unsubscribe(p->sub); /* fails when the connection is gone: nothing to undo */
                natsSubscription_Destroy(p->sub);
        }
        free(p->inbox);
        free(p->next);
        free(p);
}

/* Ask for batch messages: at once what there is (no_wait), or waiting up to wait_ms. */
static natsStatus request(struct nats_pull *p, int batch, int64_t wait_ms)
{
        char body[96];
        if (wait_ms > 0)
                snprintf(body, sizeof(body), "{\"batch\":%d,\"expires\":%" PRId64 "}", batch, wait_ms * 1000000);
        else
                snprintf(body, sizeof(body), "{\"batch\":%d,\"no_wait\":true}", batch);
        return natsConnection_PublishRequest(p->nc, p->next, p->inbox, body, (int)strlen(body));
}

/* The next message on the inbox within wait_ms (0: only one already
 * queued): one of the stream's into msgs; the server's word on a request
 * (or no responders: no JetStream there) sets *ended. */
static natsStatus next(struct nats_pull *p, natsMsg **msgs, int *got, int64_t wait_ms, int *ended)
{
        natsMsg *m = NULL;
        natsStatus s = natsSubscription_NextMsg(&m, p->sub, wait_ms);
        if (s == NATS_NO_RESPONDERS) {
                *ended = 1;
                return NATS_OK;
        }
        if (s == NATS_SLOW_CONSUMER)
                return NATS_OK; /* some were dropped: delivered again after ack_wait */
        if (s != NATS_OK)
                return s;
        const char *reply = natsMsg_GetReply(m);
        if (reply && !strncmp(reply, JS_ACK_PREFIX, strlen(JS_ACK_PREFIX))) {
                msgs[(*got)++] = m;
                return NATS_OK;
        }
        *ended = 1;
        natsMsg_Destroy(m);
        return NATS_OK;
}

/* Until batch are in msgs, the server ends the request, or deadline (log_now_ms()). */
static natsStatus collect(struct nats_pull *p, natsMsg **msgs, int batch, int *got, int64_t deadline)
{
        int ended = 0;
        natsStatus s = NATS_OK;
        while (s == NATS_OK && *got < batch && !ended) {
                int64_t left = deadline - log_now_ms();
                if (left <= 0)
                        return NATS_TIMEOUT;
                s = next(p, msgs, got, left, &ended);
        }
        return s;
}

natsStatus nats_pull_fetch(struct nats_pull *p, natsMsg **msgs, int batch, int timeout_ms, int *got)
{
        int64_t deadline = log_now_ms() + timeout_ms;
        int ended = 0;
        natsStatus s = NATS_TIMEOUT;
        *got = 0;
        /* What earlier requests brought (answered after their fetch gave up). */
        while (*got < batch && (s = next(p, msgs, got, 0, &ended)) == NATS_OK)
                ;
        if (*got == batch)
                return NATS_OK;
        if (s != NATS_TIMEOUT)
                return *got ? NATS_OK : s;
        /* What the server has now, at once; when it has nothing, the first that comes. */
        s = request(p, batch - *got, 0);
        if (s == NATS_OK)
                s = collect(p, msgs, batch, got, deadline);
        if (*got || (s != NATS_OK && s != NATS_TIMEOUT))
                return *got ? NATS_OK : s;
        int64_t left = deadline - log_now_ms();
        if (left < 1)
                return NATS_TIMEOUT;
        s = request(p, batch, left);
        if (s == NATS_OK)
                s = collect(p, msgs, batch, got, deadline);
        return *got ? NATS_OK : s == NATS_OK ? NATS_TIMEOUT : s;
}

static natsStatus answer(natsConnection *nc, natsMsg *m, const char *what)
{
        const char *reply = natsMsg_GetReply(m);
        if (!reply || strncmp(reply, JS_ACK_PREFIX, strlen(JS_ACK_PREFIX)))
                return NATS_ILLEGAL_STATE;
        return natsConnection_PublishString(nc, reply, what);
}

natsStatus nats_pull_ack(natsConnection *nc, natsMsg *m) { return answer(nc, m, "+ACK"); }

natsStatus nats_pull_term(natsConnection *nc, natsMsg *m) { return answer(nc, m, "+TERM"); }
