/* timeline: where one batch's time goes, step by step, on and off the CPU (a build with DEDUPD_TIMELINE only). */
#include "base/timeline.h"

#ifdef DEDUPD_TIMELINE
#include <stdio.h>
#include <string.h>
#include <time.h>

#define TIMELINE_STEPS 24

struct stamp {
        long long wall, cpu; /* µs */
};

/* One per thread: a partition worker's batches are its own. */
static __thread struct {
        struct stamp last, idle_from;
        const char *name[TIMELINE_STEPS];
        struct stamp spent[TIMELINE_STEPS];
        int n, idle_known;
} tl;

static long long usec(clockid_t c)
{
        struct timespec ts;
        clock_gettime(c, &ts);
        return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static struct stamp now(void) { return (struct stamp){usec(CLOCK_MONOTONIC), usec(CLOCK_THREAD_CPUTIME_ID)}; }

static void add(const char *step, struct stamp from, struct stamp to)
{
        if (tl.n == TIMELINE_STEPS)
                return;
        tl.name[tl.n] = step;
        tl.spent[tl.n++] = (struct stamp){to.wall - from.wall, to.cpu - from.cpu};
}

void timeline_begin(void)
{
        tl.n = 0;
        tl.last = now();
        if (tl.idle_known)
                add("poll", tl.idle_from, tl.last);
}

void timeline_mark(const char *step)
{
        struct stamp t = now();
        add(step, tl.last, t);
        tl.last = t;
}

void timeline_end(unsigned long n)
{
        char line[1024];
        size_t at = (size_t)snprintf(line, sizeof(line), "timeline n=%lu", n);
        for (int i = 0; i < tl.n && at < sizeof(line); i++)
                at += (size_t)snprintf(line + at, sizeof(line) - at, " %s=%lld/%lld", tl.name[i], tl.spent[i].wall,
                                       tl.spent[i].cpu);
        fprintf(stderr, "%s\n", line);
        tl.idle_from = now();
        tl.idle_known = 1;
}
#endif
