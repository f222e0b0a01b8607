/* replay_nats: dedupctl replay for source: nats — a topic's JetStream consumer and its dedupd.offsets row moved back together. */
#ifndef DEDUPD_TOOLS_REPLAY_NATS_H
#define DEDUPD_TOOLS_REPLAY_NATS_H

#include <stddef.h>

#include "base/config.h"
#include "tools/replay.h"

/** --to-beginning, --to-offset SEQ (a stream sequence) or --to-time TIME,
 *  refused while a dedupd is pulling from the consumer. */
enum replay_rc replay_nats(const struct config *cfg, const struct replay_opts *o, char *err, size_t errsz);

#endif
