/* consumer: the Kafka source — polls, batches per topic, feeds the pipeline, acknowledges after COMMIT. */
#ifndef DEDUPD_CONSUMER_H
#define DEDUPD_CONSUMER_H

#include <signal.h>
#include <stddef.h>

#include "config.h"
#include "pipeline.h"
#include "store.h"

struct consumer;

struct producer;

/** producer publishes the outbox (replies, emitted messages) after COMMIT. */
struct consumer *consumer_new(const struct config *cfg, struct store *store, struct pipeline *pl,
                              struct producer *producer, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/**
 * Run until *stop becomes non-zero. The batch in flight is finished (or
 * rolled back), committed work is acknowledged, the group is left.
 * Returns 0 on a clean stop, -1 on a fatal error (message in err).
 */
int consumer_run(struct consumer *c, volatile sig_atomic_t *stop, char *err, size_t errsz);

void consumer_free(struct consumer *c);

#endif
