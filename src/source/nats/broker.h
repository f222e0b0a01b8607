/* broker: NATS JetStream's registration — its row in the broker table (source/brokers.c). */
#ifndef DEDUPD_SOURCE_NATS_BROKER_H
#define DEDUPD_SOURCE_NATS_BROKER_H

#include "source/plugin.h"

extern const struct broker nats_broker;

#endif
