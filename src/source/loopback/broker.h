/* broker: the loopback broker's registration — its row in the broker table (source/brokers.c), in test builds only (DEDUPD_LOOPBACK). */
#ifndef DEDUPD_SOURCE_LOOPBACK_BROKER_H
#define DEDUPD_SOURCE_LOOPBACK_BROKER_H

#include "source/plugin.h"

extern const struct broker loopback_broker;

#endif
