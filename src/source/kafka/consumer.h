/* consumer: the Kafka source — a consumer in the group, its rebalances, messages handed over, positions committed after COMMIT. */
#ifndef DEDUPD_SOURCE_KAFKA_CONSUMER_H
#define DEDUPD_SOURCE_KAFKA_CONSUMER_H

#include <stddef.h>

#include "base/config.h"
#include "core/source.h"

/**
 * A consumer of every configured topic in the config's group, as a source:
 * assignments and revocations go to ev (the runner), which says where each
 * assigned partition starts. NULL with librdkafka's message in err.
 */
struct source *kafka_source_new(const struct config *cfg, struct source_events ev, char *err, size_t errsz)
        __attribute__((warn_unused_result));

#endif
