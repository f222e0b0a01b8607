/* settings: RabbitMQ's own part of the configuration — the `rabbitmq:` rows and their checks. */
#include "source/rabbitmq/settings.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <amqp.h>
#include <curl/curl.h>

#include "base/mem.h"

#define ROFF(m) offsetof(struct rmq_settings, m)

static const struct field dlq_fields[] = {
        {.name = "exchange",
         .type = F_STR,
         .off = ROFF(dlx),
         .def = "",
         .desc = "Exchange unkeyable messages are published to (unchanged, plus dedupd's reason headers; routing key: "
                 "the topic's dead_letter.topic), confirmed before the original is acked; empty: basic.reject "
                 "requeue=false to the queue's own x-dead-letter-exchange (no reason headers)"},
        {.name = NULL},
};

static const struct field fields[] = {
        {.name = "url",
         .importance = 1,
         .type = F_STR,
         .off = ROFF(url),
         .secret = 1,
         .desc = "amqp://user:password@host:port/vhost (amqps:// for TLS); put the password in ${ENV} (never logged)"},
        {.name = "prefetch",
         .type = F_INT,
         .off = ROFF(prefetch),
         .def = "1000",
         .min = 1,
         .max = 65535,
         .desc = "basic.qos: most unacknowledged deliveries at once, which bounds a batch"},
        {.name = "heartbeat_s",
         .importance = 3,
         .type = F_INT,
         .off = ROFF(heartbeat_s),
         .def = "30",
         .min = 0,
         .max = 3600,
         .desc = "AMQP heartbeat; a broker silent for twice this is a lost connection (0: none)"},
        {.name = "reconnect_max_ms",
         .importance = 3,
         .type = F_INT,
         .off = ROFF(reconnect_max_ms),
         .def = "5000",
         .min = 10,
         .max = 600000,
         .desc = "Longest wait between reconnection attempts while the broker is unreachable"},
        {.name = "ca_file",
         .type = F_STR,
         .off = ROFF(ca_file),
         .def = "",
         .desc = "With amqps://: the CA certificate (PEM) the broker's certificate is verified against"},
        {.name = "management_url",
         .type = F_STR,
         .off = ROFF(management_url),
         .def = "",
         .secret = 1,
         .desc = "http[s]://user:password@host:port[/prefix] of the management plugin (a user with the monitoring "
                 "tag): set, each queue's message TTL is compared with its retention class; empty: not checked"},
        {.name = "dead_letter", .type = F_SECTION, .sub = dlq_fields, .desc = "Where unkeyable messages go"},
        {.name = NULL},
};

static const struct field rows[] = {
        {.name = "rabbitmq",
         .importance = 1,
         .type = F_SECTION,
         .sub = fields,
         .desc = "RabbitMQ (source: rabbitmq); each topics[].name is a queue"},
        {.name = NULL},
};

const struct rmq_settings *rmq_conf(const struct config *cfg) { return config_settings_of(cfg, &rabbitmq_config); }

/* rabbitmq.management_url, when set, is an http[s] URL as curl reads it (never the URL in the message). */
static void check_management_url(struct config_checks *w, const char *url)
{
        CURLU *u = curl_url();
        char *scheme = NULL;
        CURLUcode uc = u ? curl_url_set(u, CURLUPART_URL, url, 0) : CURLUE_OUT_OF_MEMORY;
        if (uc == CURLUE_OK)
                uc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
        if (uc != CURLUE_OK || (strcmp(scheme, "http") && strcmp(scheme, "https")))
                config_errors_add(w->errs, w->file, w->line, w->col,
                                  "rabbitmq.management_url: not an http[s]://user:password@host:port[/prefix] URL%s%s",
                                  uc != CURLUE_OK ? ": " : "", uc != CURLUE_OK ? curl_url_strerror(uc) : "");
        curl_free(scheme);
        curl_url_cleanup(u);
}

/* The URL is there and parses (in a copy: never the URL itself in the message, it holds a
 * password); one connection consumes and publishes, so one thread. */
static void check(struct config_checks *w, void *settings)
{
        const struct rmq_settings *r = settings;
        if (!r->url || !*r->url) {
                if (!config_checks_refused(w, "rabbitmq.url")) /* else reported where it is */
                        config_errors_add(w->errs, w->file, w->line, w->col,
                                          "missing required key 'rabbitmq.url' (source: rabbitmq)");
        } else {
                struct amqp_connection_info info;
                char *copy = xstrdup(r->url);
                if (amqp_parse_url(copy, &info) != AMQP_STATUS_OK)
                        config_errors_add(w->errs, w->file, w->line, w->col,
                                          "rabbitmq.url: not an AMQP URL (amqp://user:password@host:port/vhost or "
                                          "amqps://...)");
                free(copy);
        }
        if (r->management_url && *r->management_url)
                check_management_url(w, r->management_url);
        if (w->cfg->workers > 1)
                config_errors_add(w->errs, w->file, w->source_line, w->source_col,
                                  "workers: %d, but RabbitMQ consumes and publishes on one connection, which one "
                                  "thread must own: workers must be 1",
                                  w->cfg->workers);
}

const struct config_broker rabbitmq_config = {
        .name = "rabbitmq",
        .title = "RabbitMQ",
        .rows = rows,
        .settings_size = sizeof(struct rmq_settings),
        .amqp_properties = 1,
        .check = check,
};
