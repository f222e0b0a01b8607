/* broker: Kafka's registration — topics checked (and dead-letter topics created) at start-up, the producer as the sink, the group consumer as the source. */
#include "source/kafka/broker.h"

#include <stdlib.h>

#include <librdkafka/rdkafka.h>

#include "base/mem.h"
#include "source/kafka/consumer.h"
#include "source/kafka/lag.h"
#include "source/kafka/producer.h"
#include "source/kafka/replay.h"
#include "source/kafka/settings.h"
#include "source/kafka/topics.h"

struct broker_run {
        const struct config *cfg;
        int64_t *dlq_max_bytes; /* per topic, what its dead-letter topic takes */
        struct producer *producer;
};

static const char *versions(char *buf, size_t bufsz)
{
        snprintf(buf, bufsz, "librdkafka %s", rd_kafka_version_str());
        return buf;
}

static struct broker_run *open_run(const struct config *cfg)
{
        struct broker_run *r = xcalloc(1, sizeof(*r));
        r->cfg = cfg;
        r->dlq_max_bytes = xcalloc(cfg->topic_cnt ? cfg->topic_cnt : 1, sizeof(*r->dlq_max_bytes));
        return r;
}

/* Every topic and dead-letter topic there (created with dead_letter.create),
 * dead letters fit, no class keeps keys shorter than its topic keeps
 * messages (said by topics_check itself). */
static enum broker_probe probe(struct broker_run *r, int left_ms, char *err, size_t errsz)
{
        int timeout = left_ms < TOPICS_CHECK_TIMEOUT_MS ? (left_ms > 1000 ? left_ms : 1000) : TOPICS_CHECK_TIMEOUT_MS;
        switch (topics_check(r->cfg, TOPICS_CREATE_MISSING, timeout, NULL, NULL, r->dlq_max_bytes, err, errsz)) {
        case TOPICS_OK: return BROKER_READY;
        case TOPICS_UNREACHABLE: return BROKER_WAIT;
        case TOPICS_REFUSED: return BROKER_REFUSED;
        default: err[0] = '\0'; return BROKER_INVALID;
        }
}

static int sink(struct broker_run *r, struct sink *out, char *err, size_t errsz)
{
        char why[1024];
        if (!(r->producer = producer_new(r->cfg, r->dlq_max_bytes, why, sizeof(why)))) {
                snprintf(err, errsz, "Kafka producer: %s", why);
                return -1;
        }
        *out = producer_sink(r->producer);
        return 0;
}

static struct source *source(struct broker_run *r, struct source_events ev, int64_t deadline_ms, int startup_timeout_ms,
                             char *err, size_t errsz)
{
        char why[1024];
        struct source *src = kafka_source_new(r->cfg, ev, why, sizeof(why));
        if (!src) {
                snprintf(err, errsz, "Kafka consumer: %s", why);
                return NULL;
        }
        kafka_source_set_startup_deadline(src, deadline_ms, startup_timeout_ms);
        return src;
}

static void close_run(struct broker_run *r)
{
        if (!r)
                return;
        producer_free(r->producer);
        free(r->dlq_max_bytes);
        free(r);
}

static void on_topics(void *opaque, enum topics_severity sev, const char *file, int line, int col, const char *msg)
{
        struct broker_report *rep = opaque;
        rep->warnings += sev == TOPICS_WARN;
        fprintf(rep->err, "%s:%d:%d: %s%s\n", file, line, col, sev == TOPICS_WARN ? "warning: " : "", msg);
}

/* dedupctl check: the topics there, as start-up needs them (nothing created). */
static enum broker_check check(const struct config *cfg, struct broker_report *rep)
{
        char err[1024];
        enum topics_rc t =
                topics_check(cfg, TOPICS_CHECK_ONLY, rep->timeout_ms, on_topics, rep, NULL, err, sizeof(err));
        return t == TOPICS_UNREACHABLE || t == TOPICS_REFUSED ? BROKER_CHECK_UNREACHABLE
               : t == TOPICS_INVALID                          ? BROKER_CHECK_INVALID
                                                              : BROKER_CHECK_OK;
}

const struct broker kafka_broker = {
        .config = &kafka_config,
        .awaited = "the broker",
        .versions = versions,
        .open = open_run,
        .probe = probe,
        .sink = sink,
        .source = source,
        .close = close_run,
        .check = check,
        .replay = kafka_replay,
        .lag = kafka_lag,
};
