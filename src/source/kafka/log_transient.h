/* log_transient: librdkafka log lines that only say a fresh broker is still starting up. */
#ifndef DEDUPD_SOURCE_KAFKA_LOG_TRANSIENT_H
#define DEDUPD_SOURCE_KAFKA_LOG_TRANSIENT_H

#include <stdint.h>

/** How long after a process's first Kafka client such a line is not worth a warning. */
#define KAFKA_LOG_TRANSIENT_MS 60000

/** 1 when line, logged ms_since_start after the first client, is a fresh
 *  broker's transient state (the idempotent producer's "Failed to acquire
 *  idempotence PID ... Coordinator load in progress") within the window:
 *  debug, not a warning. Later the same line is a broker in trouble. */
int kafka_log_transient(const char *line, int64_t ms_since_start);

#endif
