/* producer: the acknowledged producer — dead letters, replies and the outbox are handed back only once the broker has them. */
#ifndef DEDUPD_PRODUCER_H
#define DEDUPD_PRODUCER_H

#include <stddef.h>

#include "config.h"
#include "pipeline.h"

struct producer;

/** One record to produce. Headers may be NULL; a NULL header value is a null header. */
struct producer_record {
        const char *topic;
        const void *key;
        size_t key_len;
        const void *value; /* NULL: a null value */
        size_t value_len;
        const struct dedupd_header *headers;
        size_t header_cnt;
};

/** dlq_max_bytes (may be NULL): per config topic, its dead-letter topic's
 *  max.message.bytes as the broker told it (-1 unknown); the producer's own
 *  limit is raised to fit the largest dead letter, and a dead letter larger
 *  than its topic takes is cut to fit (see producer_dead_letter). */
struct producer *producer_new(const struct config *cfg, const int64_t *dlq_max_bytes, char *err,
                              size_t errsz) __attribute__((warn_unused_result));
void producer_free(struct producer *q);

/** Produce every record with an idempotent producer (acks=all) and return
 *  0 only once the broker acknowledged all of them. */
int producer_send(struct producer *q, const struct producer_record *recs, size_t n, char *err,
                  size_t errsz) __attribute__((warn_unused_result));

/** pl_dlq_ops.dead_letter: each message unchanged (key, value, headers)
 *  plus dedupd.* headers naming the reason and the origin. A record larger
 *  than the dead-letter topic takes keeps the first bytes of its value that
 *  fit (or, if even its key and headers do not, only dedupd's headers) and
 *  says so in dedupd.truncated and dedupd.original.size: a dead letter is
 *  always written, never blocks its partition. */
int producer_dead_letter(void *opaque, const char *dlq_topic, const char *ns,
                         struct pl_msg *const *msgs, size_t n, char *err, size_t errsz);

/** Properties of the `kafka:` map that only make sense for a consumer. */
int producer_is_consumer_property(const char *name);

#endif
