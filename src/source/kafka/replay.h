/* replay: Kafka's replay — the group moved back (its committed offsets and dedupd.offsets together) or a range re-produced. */
#ifndef DEDUPD_SOURCE_KAFKA_REPLAY_H
#define DEDUPD_SOURCE_KAFKA_REPLAY_H

#include <stddef.h>

#include "base/config.h"
#include "source/replay.h"

/** Reset or re-produce as o says; progress on stderr, the plan and the summary on stdout. */
enum replay_rc kafka_replay(const struct config *cfg, const struct replay_opts *o, char *err, size_t errsz);

#endif
