/* broker: Kafka's registration — its row in the broker table (source/brokers.c). */
#ifndef DEDUPD_SOURCE_KAFKA_BROKER_H
#define DEDUPD_SOURCE_KAFKA_BROKER_H

#include "source/plugin.h"

extern const struct broker kafka_broker;

#endif
