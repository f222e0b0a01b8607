/* settings: NATS JetStream's own part of the configuration — the `nats:` rows and their checks. */
#include "source/nats/settings.h"

#include <stddef.h>
#include <stdlib.h>

#include "base/mem.h"

#define NOFF(m) offsetof(struct nats_settings, m)

static const struct field dlq_fields[] = {
        {.name = "subject",
         .type = F_STR,
         .off = NOFF(dlq_subject),
         .def = "",
         .desc = "Subject unkeyable messages are published to (with dedupd.* headers giving the reason; a stream "
                 "must capture it: the PubAck is awaited before the original is acked); empty: they are "
                 "terminated (AckTerm) and stay in the stream, the reason logged"},
        {.name = NULL},
};

static const struct field fields[] = {
        {.name = "url",
         .importance = 1,
         .type = F_STR,
         .off = NOFF(url),
         .def = "nats://127.0.0.1:4222",
         .secret = 1,
         .desc = "NATS server URL(s), comma-separated; may carry user:password@ (never logged)"},
        {.name = "stream",
         .importance = 1,
         .type = F_STR,
         .off = NOFF(stream),
         .def = "",
         .desc = "The JetStream stream whose subjects are the topics[].name; required with source: nats, and "
                 "it must exist"},
        {.name = "durable",
         .importance = 3,
         .type = F_STR,
         .off = NOFF(durable),
         .def = "",
         .desc = "Durable pull consumer name prefix; each topic's consumer is <durable>-<subject> (. * > as _); "
                 "empty: dedupd-<namespace>"},
        {.name = "max_ack_pending",
         .type = F_INT,
         .off = NOFF(max_ack_pending),
         .def = "1000",
         .min = 1,
         .max = 1000000,
         .desc = "Unacknowledged messages the server lets one consumer hold; bounds a batch (batch.max_messages "
                 "may not exceed it)"},
        {.name = "ack_wait_ms",
         .type = F_INT,
         .off = NOFF(ack_wait_ms),
         .def = "30000",
         .min = 1000,
         .max = 3600000,
         .desc = "How long the server waits for an ack before redelivering; keep it above batch.timeout_ms"},
        {.name = "creds_file",
         .type = F_STR,
         .off = NOFF(creds_file),
         .def = "",
         .desc = "NATS credentials file (JWT and seed); empty: none"},
        {.name = "token",
         .type = F_STR,
         .off = NOFF(token),
         .def = "",
         .secret = 1,
         .desc = "Authentication token (never logged); put it in ${ENV}"},
        {.name = "tls_ca",
         .type = F_STR,
         .off = NOFF(tls_ca),
         .def = "",
         .desc = "CA certificates file: set, the connection uses TLS and verifies the server with it"},
        {.name = "dead_letter", .type = F_SECTION, .sub = dlq_fields, .desc = "Where unkeyable messages go"},
        {.name = NULL},
};

static const struct field rows[] = {
        {.name = "nats", .importance = 1, .type = F_SECTION, .sub = fields, .desc = "NATS JetStream (source: nats)"},
        {.name = NULL},
};

const struct nats_settings *nats_conf(const struct config *cfg) { return config_settings_of(cfg, &nats_config); }

/* A topic's dead letters: the subject, or terminated in the stream; what
 * Kafka calls dead_letter.topic is refused, batches must fit max_ack_pending. */
static void check_topic(struct config_checks *w, const struct nats_settings *n, struct topic_conf *t)
{
        if (t->dlq_topic && *t->dlq_topic)
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': dead_letter.topic is Kafka's; with source: nats set "
                                  "nats.dead_letter.subject",
                                  t->name ? t->name : "?");
        if (t->batch_max_messages > n->max_ack_pending)
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': batch.max_messages %d exceeds nats.max_ack_pending %d: the server "
                                  "would never deliver a full batch",
                                  t->name ? t->name : "?", t->batch_max_messages, n->max_ack_pending);
        free(t->dlq_topic);
        t->dlq_topic = xstrdup(n->dlq_subject && *n->dlq_subject ? n->dlq_subject
                                                                 : "AckTerm (terminated, left in the stream)");
}

/* The stream named, and each topic's batches and dead letters. */
static void check(struct config_checks *w, void *settings)
{
        struct nats_settings *n = settings;
        if ((!n->stream || !*n->stream) && !config_checks_refused(w, "nats.stream"))
                config_errors_add(w->errs, w->file, w->line, w->col,
                                  "missing required key 'nats.stream' (source: nats consumes one JetStream stream)");
        for (size_t i = 0; i < w->cfg->topic_cnt; i++)
                check_topic(w, n, &w->cfg->topics[i]);
}

const struct config_broker nats_config = {
        .name = "nats",
        .title = "NATS JetStream",
        .rows = rows,
        .settings_size = sizeof(struct nats_settings),
        .check = check,
};
