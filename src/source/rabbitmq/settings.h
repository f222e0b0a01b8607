/* settings: RabbitMQ's own part of the configuration — the `rabbitmq:` rows and their checks. */
#ifndef DEDUPD_SOURCE_RABBITMQ_SETTINGS_H
#define DEDUPD_SOURCE_RABBITMQ_SETTINGS_H

#include "base/config_impl.h"

struct rmq_settings {
        char *url; /* secret */
        int prefetch;
        int heartbeat_s;
        int reconnect_max_ms;
        char *ca_file;
        char *dlx;            /* "": reject to the queue's own dead-letter exchange */
        char *management_url; /* secret; "": the queues' message TTLs are not checked */
};

/** RabbitMQ as the configuration knows it (its row in the broker table). */
extern const struct config_broker rabbitmq_config;

/** The rabbitmq: settings of cfg. */
const struct rmq_settings *rmq_conf(const struct config *cfg);

#endif
