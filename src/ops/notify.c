/* notify: systemd's service protocol (sd_notify) — READY, WATCHDOG, RELOADING, STOPPING, STATUS; a no-op outside systemd. */
#include "ops/notify.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <systemd/sd-daemon.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t interval_ms, last_ms;

int64_t notify_init(void)
{
        uint64_t usec = 0;
        /* unset_environment 0: a child (none today) could still be watched. */
        interval_ms = sd_watchdog_enabled(0, &usec) > 0 ? (int64_t)(usec / 1000) : 0;
        return interval_ms;
}

void notify_ready(const char *status)
{
        char msg[512];
        snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", status);
        sd_notify(0, msg);
}

void notify_reloading(void) { sd_notify(0, "RELOADING=1\nSTATUS=reloading the configuration"); }

void notify_stopping(void) { sd_notify(0, "STOPPING=1\nSTATUS=stopping: finishing the batch in flight"); }

void notify_watchdog(int64_t now_ms)
{
        int ping = 0;
        if (!interval_ms)
                return;
        pthread_mutex_lock(&lock);
        if (now_ms - last_ms >= interval_ms / 2) {
                last_ms = now_ms;
                ping = 1;
        }
        pthread_mutex_unlock(&lock);
        if (ping)
                sd_notify(0, "WATCHDOG=1");
}
