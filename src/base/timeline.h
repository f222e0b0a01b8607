/* timeline: where one batch's time goes, step by step, on and off the CPU (a build with DEDUPD_TIMELINE only). */
#ifndef DEDUPD_BASE_TIMELINE_H
#define DEDUPD_BASE_TIMELINE_H

/*
 * A build configured with -DDEDUPD_TIMELINE=ON writes one line per batch to
 * stderr: each step's wall time and the CPU time this thread spent in it, in
 * microseconds; wall minus CPU is the time the step waited (on PostgreSQL, on
 * the broker). bench/timeline runs such a build and sums the lines up. In
 * every other build the marks compile to nothing.
 *
 *   timeline_begin()       the batch starts (its thread's clock is reset)
 *   timeline_mark("claim") the step called "claim" ends now
 *   timeline_end(n)        the batch of n messages is over: its line is written
 *
 * The time from the last timeline_end to the next timeline_begin is the
 * step "poll" (buffering what the source delivers).
 */
#ifdef DEDUPD_TIMELINE
void timeline_begin(void);
void timeline_mark(const char *step);
void timeline_end(unsigned long n);
#else
#define timeline_begin() ((void)0)
#define timeline_mark(step) ((void)(step))
#define timeline_end(n) ((void)(n))
#endif

#endif
