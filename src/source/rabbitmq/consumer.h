/* consumer: the RabbitMQ source — one channel per queue, manual acks after COMMIT, deliveries numbered per queue, reconnection after a loss. */
#ifndef DEDUPD_SOURCE_RABBITMQ_CONSUMER_H
#define DEDUPD_SOURCE_RABBITMQ_CONSUMER_H

#include <stddef.h>

#include "base/config.h"
#include "core/source.h"

/**
 * A consumer of every configured queue (topics[].name), as a source. It
 * connects on the first poll; every (re)connection is an assignment of
 * partition 0 of each queue (the runner says where its numbering starts:
 * the database's next offset), every loss a revocation of all of them.
 */
struct source *rmq_source_new(const struct config *cfg, struct source_events ev);

/** Past deadline_ms (log_now_ms()'s clock; 0: none) without a connection,
 *  failure() says what it was waiting for. */
void rmq_source_set_startup_deadline(struct source *src, int64_t deadline_ms, int timeout_ms);

/**
 * basic.reject requeue=false of a message this source delivered: the
 * broker dead-letters it to the queue's own x-dead-letter-exchange (or drops
 * it when the queue has none). 0, or -1 when the delivery's connection is
 * gone (it will be redelivered).
 */
int rmq_source_reject(struct source *src, const struct pl_msg *m, char *err, size_t errsz);

/** The AMQP envelope of a message this source delivered (amqp_envelope_t *). */
const void *rmq_source_envelope(const struct pl_msg *m);

#endif
