/* replay: NATS's replay — a topic's JetStream consumer and its dedupd.offsets row moved back together. */
#ifndef DEDUPD_SOURCE_NATS_REPLAY_H
#define DEDUPD_SOURCE_NATS_REPLAY_H

#include <stddef.h>

#include "base/config.h"
#include "source/replay.h"

/** --to-beginning, --to-offset SEQ (a stream sequence) or --to-time TIME,
 *  refused while a dedupd is pulling from the consumer. */
enum replay_rc nats_replay(const struct config *cfg, const struct replay_opts *o, char *err, size_t errsz);

#endif
