/* replay: what dedupctl replay reads off its command line (times, offsets, partitions); the broker replays (its broker.c). */
#ifndef DEDUPD_REPLAY_H
#define DEDUPD_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "source/replay.h"

/** A Kafka offset (a number >= 0) as given to --to-offset and --from-offset. */
int replay_parse_offset(const char *s, int64_t *out, char *err, size_t errsz);

/** "0,2,5" into a malloc'd array of distinct non-negative partitions. */
int replay_parse_partitions(const char *s, int32_t **out, size_t *cnt, char *err, size_t errsz);

#endif
