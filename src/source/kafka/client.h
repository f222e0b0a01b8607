/* client: the one place librdkafka clients are built from the config — the kafka: map, dedupd's own settings, logging. */
#ifndef DEDUPD_SOURCE_KAFKA_CLIENT_H
#define DEDUPD_SOURCE_KAFKA_CLIENT_H

#include <stddef.h>

#include <librdkafka/rdkafka.h>

#include "base/config.h"

/** How long a tool or a check waits for one answer from the broker. */
#define KAFKA_TIMEOUT_MS 15000

enum kafka_role {
        KAFKA_ROLE_CONSUMER, /* the whole kafka: map */
        KAFKA_ROLE_CLIENT,   /* any other client: the map without consumer-only properties */
        KAFKA_ROLE_ADMIN,    /* the same, and librdkafka's own log lines go to debug:
                              * the caller reports the outcome once */
};

/** 1 when name is a property only a consumer takes (left out of producers). */
int kafka_is_consumer_property(const char *name);

/** 1 when the kafka: map sets name. */
int kafka_user_set(const struct config *cfg, const char *name);

/** The kafka: map's value of name, or NULL. */
const char *kafka_property(const struct config *cfg, const char *name);

/** bootstrap.servers (or metadata.broker.list) as configured: what every
 *  "cannot reach the broker" message names. */
const char *kafka_bootstrap(const struct config *cfg);

/** 1 when e means no broker could be reached or answered (down, refused,
 *  unresolvable, timed out, TLS or SASL failing), not that one refused. */
int kafka_err_unreachable(rd_kafka_resp_err_t e);

/**
 * A conf for role from the kafka: map, logging through dedupd's logger, then
 * `extra` (NULL-terminated name, value pairs; NULL: none) set over it.
 * librdkafka's message is copied verbatim into err. The caller owns the conf
 * until rd_kafka_new() takes it.
 */
rd_kafka_conf_t *kafka_conf(const struct config *cfg, enum kafka_role role, const char *const *extra, char *err,
                            size_t errsz);

/** A client of type for role; a non-NULL group joins nothing by itself but
 *  names the group whose offsets it reads or moves (auto commit and offset
 *  store off). NULL with librdkafka's message in err. */
rd_kafka_t *kafka_client(const struct config *cfg, rd_kafka_type_t type, enum kafka_role role, const char *group,
                         char *err, size_t errsz);

/** Partitions of topic from the broker's metadata; -1 with a message (the
 *  topic does not exist, the broker did not answer). */
int kafka_partition_count(rd_kafka_t *rk, const char *topic, char *err, size_t errsz);

#endif
