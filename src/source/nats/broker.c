/* broker: NATS JetStream's registration — one connection for the stream check, the publisher (the sink) and the pull consumers (the source). */
#include "source/nats/broker.h"

#include <inttypes.h>
#include <stdlib.h>

#include <nats/nats.h>

#include "base/log.h"
#include "base/mem.h"
#include "source/nats/consumers.h"
#include "source/nats/lag.h"
#include "source/nats/link.h"
#include "source/nats/publisher.h"
#include "source/nats/replay.h"
#include "source/nats/settings.h"
#include "source/nats/source.h"

struct broker_run {
        const struct config *cfg;
        struct nats_link link; /* the one connection */
        struct nats_publisher *pub;
};

static const char *versions(char *buf, size_t bufsz)
{
        snprintf(buf, bufsz, "nats.c %s", nats_GetVersion());
        return buf;
}

static struct broker_run *open_run(const struct config *cfg)
{
        struct broker_run *r = xcalloc(1, sizeof(*r));
        r->cfg = cfg;
        return r;
}

/* The server reached and the stream there. */
static enum broker_probe probe(struct broker_run *r, int left_ms, char *err, size_t errsz)
{
        (void)left_ms; /* each attempt is bounded by the connection's own timeouts */
        if (!r->link.nc && nats_link_open(&r->link, r->cfg, err, errsz))
                return BROKER_WAIT;
        switch (nats_stream_check(&r->link, r->cfg, NULL, err, errsz)) {
        case NATS_CHECK_OK:
                log_info("dedupd", "connected to NATS %s, stream %s", r->link.server, nats_conf(r->cfg)->stream);
                return BROKER_READY;
        case NATS_CHECK_UNREACHABLE: return BROKER_WAIT;
        default: return BROKER_INVALID;
        }
}

static int sink(struct broker_run *r, struct sink *out, char *err, size_t errsz)
{
        (void)err;
        (void)errsz;
        r->pub = nats_publisher_new(&r->link, r->cfg);
        *out = nats_sink(r->pub);
        return 0;
}

static struct source *source(struct broker_run *r, struct source_events ev, int64_t deadline_ms, int startup_timeout_ms,
                             char *err, size_t errsz)
{
        char why[1024];
        struct source *src = nats_source_new(r->cfg, &r->link, ev, why, sizeof(why));
        if (!src) {
                snprintf(err, errsz, "NATS consumer: %s", why);
                return NULL;
        }
        nats_source_set_startup_deadline(src, deadline_ms, startup_timeout_ms);
        return src;
}

static void close_run(struct broker_run *r)
{
        if (!r)
                return;
        nats_publisher_free(r->pub);
        nats_link_close(&r->link);
        free(r);
}

/* dedupctl check: the server answers and holds the stream. */
static enum broker_check check(const struct config *cfg, struct broker_report *rep)
{
        struct nats_link l;
        char err[1200];
        uint64_t last = 0;
        if (nats_link_open(&l, cfg, err, sizeof(err))) {
                fprintf(rep->err, "%s: %s\n", rep->path, err);
                return BROKER_CHECK_UNREACHABLE;
        }
        enum nats_check_rc c = nats_stream_check(&l, cfg, &last, err, sizeof(err));
        if (c == NATS_CHECK_OK)
                fprintf(rep->out, "stream %s on %s: exists, last sequence %" PRIu64 "\n", nats_conf(cfg)->stream,
                        l.server, last);
        else
                fprintf(rep->err, "%s: %s\n", rep->path, err);
        nats_link_close(&l);
        return c == NATS_CHECK_OK       ? BROKER_CHECK_OK
               : c == NATS_CHECK_FAILED ? BROKER_CHECK_INVALID
                                        : BROKER_CHECK_UNREACHABLE;
}

const struct broker nats_broker = {
        .config = &nats_config,
        .awaited = "NATS",
        .versions = versions,
        .open = open_run,
        .probe = probe,
        .sink = sink,
        .source = source,
        .close = close_run,
        .check = check,
        .replay = nats_replay,
        .lag = nats_lag,
};
