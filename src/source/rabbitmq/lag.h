/* lag: dedupctl verify's lag on RabbitMQ — no offsets to compare, so the messages ready per queue. */
#ifndef DEDUPD_SOURCE_RABBITMQ_LAG_H
#define DEDUPD_SOURCE_RABBITMQ_LAG_H

#include "source/plugin.h"

/** The ready messages of each queue; with expect_caught_up, each queue that has any is a finding. */
int rmq_lag(struct store *s, const struct config *cfg, FILE *out, int expect_caught_up, broker_finding_fn finding,
            void *opaque, char *err, size_t errsz);

#endif
