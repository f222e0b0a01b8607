/* stats: librdkafka's statistics (statistics.interval.ms) — consumer lag per partition into the metrics, and whether a broker is up. */
#ifndef DEDUPD_SOURCE_KAFKA_STATS_H
#define DEDUPD_SOURCE_KAFKA_STATS_H

#include <stddef.h>

#include <librdkafka/rdkafka.h>

/** How often librdkafka reports when metrics are served and the config sets nothing. */
#define KAFKA_STATS_INTERVAL_MS "5000"

/** rd_kafka_conf_set_stats_cb's callback: returns 0 (librdkafka frees json). */
int kafka_stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque);

/** One statistics document's lags into the metrics; -1 when it is not JSON. */
int kafka_stats_apply(const char *json, size_t len);

/** Brokers (not librdkafka's internal one) a statistics document says are
 *  UP; -1 when it is not JSON. */
int kafka_stats_brokers_up(const char *json, size_t len);

#endif
