/* fault: named fault points the fault-injection tests arm with DEDUPD_FAULT (test builds only). */
#include "base/fault.h"

#ifdef DEDUPD_FAULT_POINTS
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

static int parsed;
static char point[64];
static long nth = 1, hits;
static int sig = SIGKILL;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* partition workers pass points at once */

void fault_point(const char *name)
{
        pthread_mutex_lock(&lock);
        if (!parsed) {
                const char *env = getenv("DEDUPD_FAULT");
                parsed = 1;
                if (env && *env) {
                        char action[16] = "kill";
                        if (sscanf(env, "%63[^:]:%ld:%15s", point, &nth, action) < 1)
                                point[0] = '\0';
                        if (!strcmp(action, "stop"))
                                sig = SIGSTOP;
                        log_warn("fault", "armed: %s on hit %ld -> %s", point, nth, action);
                }
        }
        int hit = point[0] && !strcmp(point, name) && ++hits == nth;
        pthread_mutex_unlock(&lock);
        if (!hit)
                return;
        log_warn("fault", "fault point %s reached: raising %s", name, sig == SIGKILL ? "SIGKILL" : "SIGSTOP");
        raise(sig);
}
#endif
