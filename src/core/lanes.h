/* lanes: the partition workers — each lane's batches on a thread of its own, handed over and collected by the runner's thread. */
#ifndef DEDUPD_CORE_LANES_H
#define DEDUPD_CORE_LANES_H

#include <stddef.h>

#include "core/mode.h"
#include "core/pipeline.h"

/** One batch handed to a lane, and (once done) what became of it. */
struct lane_job {
        size_t lane, topic, buf; /* buf: the runner's buffer it came from */
        struct pl_entry **ents;  /* a copy of the buffer's first n pointers: the runner may grow its buffer */
        size_t n;
        enum pl_rc rc;
        size_t taken;
        struct pl_commit *commits; /* room for n + 1 */
        size_t nc;
        char err[1024];
};

struct lane_job *lane_job_new(size_t lane, size_t topic, size_t buf, struct pl_entry *const *ents, size_t n);
void lane_job_free(struct lane_job *j);

struct lanes;

/**
 * The lanes of pl. threaded: each runs on a thread of its own and
 * lanes_submit returns at once; else (one lane) the job runs inside
 * lanes_submit, on the caller's thread — the serial loop, exactly. NULL
 * with why in err when a thread cannot be started.
 */
struct lanes *lanes_start(struct pipeline *pl, int threaded, char *err, size_t errsz);
/** Waits for the jobs in flight, then ends the threads; their results are dropped (collect them first). */
void lanes_stop(struct lanes *ls);

int lanes_threaded(const struct lanes *ls);
size_t lanes_count(const struct lanes *ls);
/** 1 while a job of that lane is in flight or done but not collected. */
int lanes_busy(const struct lanes *ls, size_t lane);
int lanes_any_busy(const struct lanes *ls);

/** Hand job to its lane (idle: !lanes_busy); the lanes own it until collected. */
void lanes_submit(struct lanes *ls, struct lane_job *job);

/** A finished job (its lane idle again), waiting up to wait_ms for one; NULL if none. */
struct lane_job *lanes_collect(struct lanes *ls, int wait_ms);

#endif
