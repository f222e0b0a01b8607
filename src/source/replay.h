/* replay: what a broker's replay is asked (dedupctl replay) and what it answers. */
#ifndef DEDUPD_SOURCE_REPLAY_H
#define DEDUPD_SOURCE_REPLAY_H

#include <stddef.h>
#include <stdint.h>

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
        int64_t to_offset;  /* -1: not given */
        int64_t to_time_ms; /* -1: not given */
        /* reproduce: the start of the range (inclusive) */
        int64_t from_offset;  /* -1: not given (the low watermark) */
        int64_t from_time_ms; /* -1: not given */
};

#endif
