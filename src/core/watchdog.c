/* watchdog: aborts a batch that runs too long — first its SQL, then the process. */
#include "core/watchdog.h"

#include "base/mem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "ops/notify.h"
#include "pg/cancel.h"

#define WATCHDOG_TICK_MS 50
#define EXIT_STALLED 4

struct watchdog {
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        int running;
        /* the armed batch */
        int armed;
        struct store_cancel *cancel; /* aimed at the armed batch's connection */
        int64_t started_ms;
        int timeout_ms;
        int64_t cancelled_ms; /* 0: not yet */
        char what[160];
};

static void *watch(void *arg)
{
        struct watchdog *w = arg;
        pthread_mutex_lock(&w->lock);
        while (w->running) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += WATCHDOG_TICK_MS * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                pthread_cond_timedwait(&w->cond, &w->lock, &ts);
                if (!w->armed)
                        continue;
                int64_t now = log_now_ms(), ran = now - w->started_ms;
                /* systemd's watchdog is kept fed while the batch is within its
                 * own timeout; a batch past it stops the pings. */
                if (!w->cancelled_ms && ran <= w->timeout_ms)
                        notify_watchdog(now);
                if (!w->cancelled_ms && ran > w->timeout_ms) {
                        char err[256];
                        log_error("watchdog",
                                  "%s still running after %lld ms (batch.timeout_ms %d): "
                                  "cancelling its SQL",
                                  w->what, (long long)ran, w->timeout_ms);
                        if (store_cancel_send(w->cancel, err, sizeof(err)))
                                log_warn("watchdog", "cancel request failed: %s", err);
                        w->cancelled_ms = now;
                } else if (w->cancelled_ms) {
                        int grace = w->timeout_ms / 2 > 2000 ? w->timeout_ms / 2 : 2000;
                        if (now - w->cancelled_ms > grace) {
                                log_error("watchdog",
                                          "%s still running %lld ms after its SQL was "
                                          "cancelled (stuck outside the database): ending the "
                                          "process so the database rolls the batch back",
                                          w->what, (long long)(now - w->cancelled_ms));
                                _exit(EXIT_STALLED);
                        }
                }
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

struct watchdog *watchdog_start(char *err, size_t errsz)
{
        struct watchdog *w = xcalloc(1, sizeof(*w));
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->cond, NULL);
        w->running = 1;
        w->cancel = store_cancel_new();
        if (pthread_create(&w->thread, NULL, watch, w)) {
                snprintf(err, errsz, "cannot start the watchdog thread");
                store_cancel_free(w->cancel);
                free(w);
                return NULL;
        }
        return w;
}

void watchdog_stop(struct watchdog *w)
{
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->running = 0;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
        store_cancel_free(w->cancel);
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->cond);
        free(w);
}

void watchdog_arm(struct watchdog *w, const struct store *s, int timeout_ms, const char *what)
{
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        store_cancel_aim(w->cancel, s);
        w->armed = 1;
        w->started_ms = log_now_ms();
        w->timeout_ms = timeout_ms;
        w->cancelled_ms = 0;
        snprintf(w->what, sizeof(w->what), "%s", what);
        pthread_mutex_unlock(&w->lock);
}

void watchdog_disarm(struct watchdog *w)
{
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->armed = 0;
        if (w->cancelled_ms)
                log_info("watchdog", "%s ended %lld ms after it was cancelled", w->what,
                         (long long)(log_now_ms() - w->cancelled_ms));
        pthread_mutex_unlock(&w->lock);
}
