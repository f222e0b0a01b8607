/* lag: dedupctl verify's lag on Kafka — per partition, the high watermark against dedupd's position and the group's committed offset. */
#ifndef DEDUPD_SOURCE_KAFKA_LAG_H
#define DEDUPD_SOURCE_KAFKA_LAG_H

#include "source/plugin.h"

/** The table; with expect_caught_up, each partition not caught up (by dedupd or the group) is a finding. */
int kafka_lag(struct store *s, const struct config *cfg, FILE *out, int expect_caught_up, broker_finding_fn finding,
              void *opaque, char *err, size_t errsz);

#endif
