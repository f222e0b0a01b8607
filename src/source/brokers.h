/* brokers: the table of brokers — one row each (brokers.c); a broker's folder holds the rest of it. */
#ifndef DEDUPD_SOURCE_BROKERS_H
#define DEDUPD_SOURCE_BROKERS_H

#include <stddef.h>

#include "source/plugin.h"

/** The i-th broker of the table, NULL past the last. */
const struct broker *broker_at(size_t i);

/** The broker cfg consumes. */
const struct broker *broker_of(const struct config *cfg);

/** Every broker's libraries, "librdkafka 2.0.2, nats.c 3.3.0, ..." into buf. */
const char *broker_versions(char *buf, size_t bufsz);

#endif
