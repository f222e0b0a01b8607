/* producer: the acknowledged producer — dead letters, replies and the outbox are handed back only once the broker has them. */
#ifndef DEDUPD_SOURCE_KAFKA_PRODUCER_H
#define DEDUPD_SOURCE_KAFKA_PRODUCER_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "core/source.h"

struct producer;

/** dlq_max_bytes (may be NULL): per config topic, its dead-letter topic's
 *  max.message.bytes as the broker told it (-1 unknown); the producer's own
 *  limit is raised to fit the largest dead letter, and a dead letter larger
 *  than its topic takes is cut to fit (see producer_dead_letter). */
struct producer *producer_new(const struct config *cfg, const int64_t *dlq_max_bytes, char *err, size_t errsz)
        __attribute__((warn_unused_result));
void producer_free(struct producer *q);

/** The producer as the protocol's sink (publish and dead_letter below). */
struct sink producer_sink(struct producer *q);

/** Produce every record with an idempotent producer (acks=all) and return
 *  0 only once the broker acknowledged all of them. */
int producer_send(struct producer *q, const struct record *recs, size_t n, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** Each message unchanged (key, value, headers) plus dedupd.* headers
 *  naming the reason and the origin. A record larger than the dead-letter
 *  topic takes keeps the first bytes of its value that fit (or, if even its
 *  key and headers do not, only dedupd's headers) and says so in
 *  dedupd.truncated and dedupd.original.size: a dead letter is always
 *  written, never blocks its partition. */
int producer_dead_letter(void *opaque, const char *dlq_topic, const char *ns, const struct pl_dead_letter *letters,
                         size_t n, char *err, size_t errsz);

#endif
