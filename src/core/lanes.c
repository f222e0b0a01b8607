/* lanes: the partition workers — each lane's batches on a thread of its own, handed over and collected by the runner's thread. */
#include "core/lanes.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/timeline.h"

struct lane_slot {
        struct lanes *ls;
        size_t idx;
        pthread_t thread;
        int started;
        struct lane_job *job; /* in flight, or done and not collected */
        int done;
};

struct lanes {
        struct pipeline *pl;
        int threaded, quit;
        size_t n;
        struct lane_slot *slots;
        pthread_mutex_t lock;
        pthread_cond_t work; /* a job was handed over, or quit */
        pthread_cond_t done; /* a job is done */
};

struct lane_job *lane_job_new(size_t lane, size_t topic, size_t buf, struct pl_entry *const *ents, size_t n)
{
        struct lane_job *j = xcalloc(1, sizeof(*j));
        *j = (struct lane_job){.lane = lane, .topic = topic, .buf = buf, .n = n};
        j->ents = xcalloc(n ? n : 1, sizeof(*j->ents));
        memcpy(j->ents, ents, n * sizeof(*ents));
        j->commits = xcalloc(n + 1, sizeof(*j->commits));
        return j;
}

void lane_job_free(struct lane_job *j)
{
        if (!j)
                return;
        free(j->ents);
        free(j->commits);
        free(j);
}

/* A lane's connection went away with a batch: it reconnects before the
 * next one (the runner's own connection is the runner's business). */
static int lane_connected(struct lanes *ls, struct lane_job *j)
{
        struct store *s = pipeline_lane_store(ls->pl, j->lane);
        if (store_ok(s))
                return 1;
        if (store_connect(s, j->err, sizeof(j->err)) == STORE_OK)
                return 1;
        j->rc = PL_DB_DOWN;
        return 0;
}

static void run_job(struct lanes *ls, struct lane_job *j)
{
        j->err[0] = '\0';
        if (ls->threaded && !lane_connected(ls, j))
                return;
        j->rc = pipeline_process(ls->pl, j->lane, j->topic, j->ents, j->n, &j->taken, j->commits, &j->nc, j->err,
                                 sizeof(j->err));
}

static void *lane_main(void *arg)
{
        struct lane_slot *sl = arg;
        struct lanes *ls = sl->ls;
        pthread_mutex_lock(&ls->lock);
        for (;;) {
                while (!ls->quit && (!sl->job || sl->done))
                        pthread_cond_wait(&ls->work, &ls->lock);
                if (ls->quit && (!sl->job || sl->done))
                        break;
                struct lane_job *j = sl->job;
                pthread_mutex_unlock(&ls->lock);
                timeline_begin();
                run_job(ls, j);
                timeline_end(j->taken);
                pthread_mutex_lock(&ls->lock);
                sl->done = 1;
                pthread_cond_broadcast(&ls->done);
        }
        pthread_mutex_unlock(&ls->lock);
        return NULL;
}

struct lanes *lanes_start(struct pipeline *pl, int threaded, char *err, size_t errsz)
{
        struct lanes *ls = xcalloc(1, sizeof(*ls));
        ls->pl = pl;
        ls->threaded = threaded;
        ls->n = pipeline_lanes(pl);
        ls->slots = xcalloc(ls->n ? ls->n : 1, sizeof(*ls->slots));
        pthread_mutex_init(&ls->lock, NULL);
        pthread_cond_init(&ls->work, NULL);
        pthread_cond_init(&ls->done, NULL);
        for (size_t i = 0; i < ls->n; i++) {
                ls->slots[i] = (struct lane_slot){.ls = ls, .idx = i};
                if (!threaded)
                        continue;
                int e = pthread_create(&ls->slots[i].thread, NULL, lane_main, &ls->slots[i]);
                if (e) {
                        snprintf(err, errsz, "starting worker %zu: %s", i + 1, strerror(e));
                        lanes_stop(ls);
                        return NULL;
                }
                ls->slots[i].started = 1;
        }
        return ls;
}

void lanes_stop(struct lanes *ls)
{
        if (!ls)
                return;
        pthread_mutex_lock(&ls->lock);
        ls->quit = 1;
        pthread_cond_broadcast(&ls->work);
        pthread_mutex_unlock(&ls->lock);
        for (size_t i = 0; i < ls->n; i++) {
                if (ls->slots[i].started)
                        pthread_join(ls->slots[i].thread, NULL);
                lane_job_free(ls->slots[i].job);
        }
        pthread_cond_destroy(&ls->work);
        pthread_cond_destroy(&ls->done);
        pthread_mutex_destroy(&ls->lock);
        free(ls->slots);
        free(ls);
}

int lanes_threaded(const struct lanes *ls) { return ls->threaded; }

size_t lanes_count(const struct lanes *ls) { return ls->n; }

/* Read by the runner's thread only, which alone hands jobs over and collects them. */
int lanes_busy(const struct lanes *ls, size_t lane) { return ls->slots[lane].job != NULL; }

int lanes_any_busy(const struct lanes *ls)
{
        for (size_t i = 0; i < ls->n; i++)
                if (ls->slots[i].job)
                        return 1;
        return 0;
}

void lanes_submit(struct lanes *ls, struct lane_job *job)
{
        struct lane_slot *sl = &ls->slots[job->lane];
        if (!ls->threaded) {
                run_job(ls, job);
                sl->job = job;
                sl->done = 1;
                return;
        }
        pthread_mutex_lock(&ls->lock);
        sl->job = job;
        sl->done = 0;
        pthread_cond_broadcast(&ls->work);
        pthread_mutex_unlock(&ls->lock);
}

static struct lane_job *take_done(struct lanes *ls)
{
        for (size_t i = 0; i < ls->n; i++) {
                struct lane_slot *sl = &ls->slots[i];
                if (sl->job && sl->done) {
                        struct lane_job *j = sl->job;
                        sl->job = NULL;
                        sl->done = 0;
                        return j;
                }
        }
        return NULL;
}

static struct timespec deadline_in(int ms)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        return ts;
}

struct lane_job *lanes_collect(struct lanes *ls, int wait_ms)
{
        if (!ls->threaded)
                return take_done(ls);
        struct timespec until = deadline_in(wait_ms > 0 ? wait_ms : 0);
        pthread_mutex_lock(&ls->lock);
        struct lane_job *j;
        while (!(j = take_done(ls)) && wait_ms > 0 && lanes_any_busy(ls))
                if (pthread_cond_timedwait(&ls->done, &ls->lock, &until) == ETIMEDOUT) {
                        j = take_done(ls);
                        break;
                }
        pthread_mutex_unlock(&ls->lock);
        return j;
}
