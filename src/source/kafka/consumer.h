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

/**
 * Startup ends when the group hands this member its first assignment (empty
 * or not). Until deadline_ms (log_now_ms()'s clock; 0: none) the source
 * waits for it; past it, failure() says what it was waiting for: the group,
 * the bootstrap servers, librdkafka's last error. timeout_ms is what the
 * message quotes as startup_timeout_ms.
 */
void kafka_source_set_startup_deadline(struct source *src, int64_t deadline_ms, int timeout_ms);

#endif
