/* broker: RabbitMQ's registration — queues checked at start-up, one connection that consumes (the source) and publishes (the sink, attached to it). */
#include "source/rabbitmq/broker.h"

#include <stdlib.h>

#include <amqp.h>

#include "base/mem.h"
#include "source/rabbitmq/consumer.h"
#include "source/rabbitmq/lag.h"
#include "source/rabbitmq/publisher.h"
#include "source/rabbitmq/queues.h"
#include "source/rabbitmq/settings.h"

struct broker_run {
        const struct config *cfg;
        struct rmq_publisher *pub;
};

static const char *versions(char *buf, size_t bufsz)
{
        snprintf(buf, bufsz, "librabbitmq %s", amqp_version());
        return buf;
}

static struct broker_run *open_run(const struct config *cfg)
{
        struct broker_run *r = xcalloc(1, sizeof(*r));
        r->cfg = cfg;
        return r;
}

/* Every queue, and the dead-letter exchange, there. */
static enum broker_probe probe(struct broker_run *r, int left_ms, char *err, size_t errsz)
{
        (void)left_ms;
        switch (rmq_queues_check(r->cfg, 1, err, errsz)) {
        case RMQ_CHECK_OK: return BROKER_READY;
        case RMQ_CHECK_UNREACHABLE: return BROKER_WAIT;
        default: return BROKER_INVALID;
        }
}

static int sink(struct broker_run *r, struct sink *out, char *err, size_t errsz)
{
        (void)err;
        (void)errsz;
        r->pub = rmq_publisher_new(r->cfg);
        *out = rmq_publisher_sink(r->pub);
        return 0;
}

/* The consumer's connection is the one the publisher publishes on. */
static struct source *source(struct broker_run *r, struct source_events ev, int64_t deadline_ms, int startup_timeout_ms,
                             char *err, size_t errsz)
{
        (void)err;
        (void)errsz;
        struct source *src = rmq_source_new(r->cfg, ev);
        rmq_source_set_startup_deadline(src, deadline_ms, startup_timeout_ms);
        rmq_publisher_attach(r->pub, src);
        return src;
}

static void close_run(struct broker_run *r)
{
        if (!r)
                return;
        rmq_publisher_free(r->pub);
        free(r);
}

/* dedupctl check: every queue and the dead-letter exchange exist; where dead letters go without one. */
static enum broker_check check(const struct config *cfg, struct broker_report *rep)
{
        const char *dlx = rmq_conf(cfg)->dlx;
        char err[1024];
        enum rmq_check_rc rc = rmq_queues_check(cfg, 0, err, sizeof(err));
        if (rc != RMQ_CHECK_OK) {
                fprintf(rep->err, "%s: %s%s\n", rep->path, rc == RMQ_CHECK_UNREACHABLE ? "RabbitMQ: " : "", err);
                return rc == RMQ_CHECK_INVALID ? BROKER_CHECK_INVALID : BROKER_CHECK_UNREACHABLE;
        }
        fprintf(rep->out, "RabbitMQ: every queue exists%s\n", *dlx ? ", and the dead-letter exchange" : "");
        if (*dlx)
                return BROKER_CHECK_OK;
        rep->warnings++;
        fprintf(rep->err,
                "%s: warning: rabbitmq.dead_letter.exchange is not set: unkeyable messages are rejected to each "
                "queue's own x-dead-letter-exchange, without reason headers (dropped where a queue has none)\n",
                rep->path);
        return BROKER_CHECK_OK;
}

const struct broker rabbitmq_broker = {
        .config = &rabbitmq_config,
        .awaited = "RabbitMQ",
        .versions = versions,
        .acks_final = 1,
        .open = open_run,
        .probe = probe,
        .sink = sink,
        .source = source,
        .close = close_run,
        .check = check,
        .no_replay = "source rabbitmq has no offsets to move back: publish the messages again instead (the dedup "
                     "table absorbs the ones already done)",
        .lag = rmq_lag,
};
