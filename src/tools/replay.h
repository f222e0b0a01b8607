/* replay: move a group back (Kafka's committed offsets and dedupd.offsets together) or re-produce records. */
#ifndef DEDUPD_REPLAY_H
#define DEDUPD_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "base/config.h"

/** Outcomes, equal to dedupctl's exit codes. */
enum replay_rc {
        REPLAY_OK = 0,
        REPLAY_FAILED = 1, /* refused (active members) or a step failed */
        REPLAY_USAGE = 2,  /* bad input: unknown topic, partition out of range, bad time */
};

struct replay_opts {
        const char *topic;
        const int32_t *partitions; /* NULL: every partition of the topic */
        size_t partition_cnt;
        int reproduce; /* 0: reset the group's position; 1: produce the range again */
        int dry_run;

        /* reset: exactly one target */
        int to_beginning;
        /* reset: the new position; reproduce: the end of the range (exclusive) */
        int64_t to_offset; /* -1: not given */
        int64_t to_time_ms; /* -1: not given */
        /* reproduce: the start of the range (inclusive) */
        int64_t from_offset; /* -1: not given (the low watermark) */
        int64_t from_time_ms; /* -1: not given */
};

/** Kafka: reset or re-produce as o says (NATS: replay_nats); progress on stderr, the plan and the summary on stdout. */
enum replay_rc replay_run(const struct config *cfg, const struct replay_opts *o, char *err,
                          size_t errsz);

/** "2026-11-29T20:00:00Z" (fraction and ±HH:MM allowed, a zone required) or epoch
 *  milliseconds into epoch milliseconds. */
int replay_parse_time(const char *s, int64_t *ms, char *err, size_t errsz);

/** A Kafka offset (a number >= 0) as given to --to-offset and --from-offset. */
int replay_parse_offset(const char *s, int64_t *out, char *err, size_t errsz);

/** "0,2,5" into a malloc'd array of distinct non-negative partitions. */
int replay_parse_partitions(const char *s, int32_t **out, size_t *cnt, char *err, size_t errsz);



#endif
