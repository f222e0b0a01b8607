/* settings: Kafka's own part of the configuration — the `kafka:` map of librdkafka properties, its rows and its checks. */
#ifndef DEDUPD_SOURCE_KAFKA_SETTINGS_H
#define DEDUPD_SOURCE_KAFKA_SETTINGS_H

#include "base/config_impl.h"

struct kafka_settings {
        struct config_kvs props; /* kafka: librdkafka properties, passed verbatim */
};

/** Kafka as the configuration knows it (its row in the broker table). */
extern const struct config_broker kafka_config;

/** The kafka: map of cfg. */
const struct config_kvs *kafka_props(const struct config *cfg);

/** A kafka: property whose value must not be shown (SASL, TLS keys). */
int kafka_secret_property(const char *name);

#endif
