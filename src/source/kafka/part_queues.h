/* part_queues: one librdkafka queue per assigned partition, read only while the runner does not hold it — a pause that drops nothing. */
#ifndef DEDUPD_SOURCE_KAFKA_PART_QUEUES_H
#define DEDUPD_SOURCE_KAFKA_PART_QUEUES_H

#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "base/config.h"

/*
 * rd_kafka_pause_partitions drops what librdkafka had fetched of a
 * partition, and its resume fetches it again while the worker waits: with
 * partition workers, whose partitions pause each time a worker is a few
 * batches behind, a backlog was consumed at half the speed. Here each
 * assigned partition's messages stay in a queue of their own (no longer
 * forwarded to the consumer's), which the source reads only while the
 * partition is not held: a held partition keeps what was fetched, and
 * librdkafka stops fetching it once its queue is full (queued.min.messages,
 * queued.max.messages.kbytes: per partition with queues of their own). The
 * consumer's queue still carries the rebalances, errors and statistics.
 *
 * Waiting: librdkafka writes a byte to a pipe whenever one of these queues,
 * or the consumer's, goes from empty to not empty; kafka_part_queues_wait
 * polls that pipe.
 */
struct kafka_part_queues;

/** The queues of rk's consumer, which must be set up (rd_kafka_poll_set_consumer). NULL with err on failure. */
struct kafka_part_queues *kafka_part_queues_new(rd_kafka_t *rk, char *err, size_t errsz);
void kafka_part_queues_free(struct kafka_part_queues *pq);

/** Right after rd_kafka_assign(l): each partition of l the config consumes gets a queue of its own, not held. */
void kafka_part_queues_assigned(struct kafka_part_queues *pq, const struct config *cfg,
                                const rd_kafka_topic_partition_list_t *l);
/** Before rd_kafka_assign(NULL): every partition's queue forwarded to the consumer's again, as librdkafka has it. */
void kafka_part_queues_revoked(struct kafka_part_queues *pq);

/** Hold (or release) a partition's messages: a held partition is not read. */
void kafka_part_queues_hold(struct kafka_part_queues *pq, const char *topic, int32_t partition, int hold);

/** The next message (or event) of a partition not held, in turn; NULL when none has one now. */
rd_kafka_message_t *kafka_part_queues_next(struct kafka_part_queues *pq);

/** Forget the wake-ups so far: call before looking at the queues. */
void kafka_part_queues_clear(struct kafka_part_queues *pq);
/** Wait up to timeout_ms for a queue to go from empty to not empty (or the consumer's): 1 if one did. */
int kafka_part_queues_wait(struct kafka_part_queues *pq, int timeout_ms);

#endif
