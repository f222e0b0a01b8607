/* positions: where each assigned Kafka partition stands — handed over, acknowledged, and the offsets librdkafka proved hold nothing for dedupd. */
#ifndef DEDUPD_SOURCE_KAFKA_POSITIONS_H
#define DEDUPD_SOURCE_KAFKA_POSITIONS_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "base/config.h"
#include "core/source.h"

/*
 * A read_committed consumer never sees a transaction's commit or abort
 * marker, nor an aborted transaction's records, yet they take offsets:
 * acknowledging "last message + 1" leaves a partition a transactional
 * producer wrote behind its high watermark for ever. librdkafka moves the
 * application's position (rd_kafka_position) past them when the poll
 * serves them, in order with the messages. So where a partition has
 * nothing outstanding — every message handed over is acknowledged — and
 * its position is beyond what was acknowledged, the offsets in between
 * held nothing for dedupd: kafka_positions_skipped says so.
 */
struct kafka_positions;

struct kafka_positions *kafka_positions_new(void);
void kafka_positions_free(struct kafka_positions *kp);

/** The partitions of l that the config consumes are now this process's,
 *  each starting at its offset in l (>= 0: the database's position; else
 *  not known). What was known about them before is forgotten. */
void kafka_positions_assigned(struct kafka_positions *kp, const struct config *cfg,
                              const rd_kafka_topic_partition_list_t *l);
/** These partitions are gone (all of them when l is NULL). */
void kafka_positions_revoked(struct kafka_positions *kp, const struct config *cfg,
                             const rd_kafka_topic_partition_list_t *l);
/** A partition was moved to offset (a seek): it starts there again, as if assigned. */
void kafka_positions_moved(struct kafka_positions *kp, size_t topic_idx, int32_t partition, int64_t offset);
/** A message at offset was handed over. */
void kafka_positions_delivered(struct kafka_positions *kp, size_t topic_idx, int32_t partition, int64_t offset);
/** The partition was acknowledged up to next_offset. */
void kafka_positions_acked(struct kafka_positions *kp, size_t topic_idx, int32_t partition, int64_t next_offset);
/** Up to max partitions whose position is beyond what was acknowledged with
 *  nothing outstanding: out[i] is done from .from (-1: the partition had no
 *  position when assigned, and nothing was handed over since) up to .to. */
size_t kafka_positions_skipped(struct kafka_positions *kp, rd_kafka_t *rk, const struct config *cfg,
                               struct pl_skip *out, size_t max);

#endif
