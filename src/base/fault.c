/* fault: named fault points the fault-injection tests arm with DEDUPD_FAULT (test builds only). */
#include "base/fault.h"

#ifdef DEDUPD_FAULT_POINTS
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

static int parsed;
static char point[64];
static long nth = 1, hits;
static int sig = SIGKILL;

void fault_point(const char *name)
{
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
        if (!point[0] || strcmp(point, name) || ++hits != nth)
                return;
        log_warn("fault", "fault point %s reached: raising %s", name, sig == SIGKILL ? "SIGKILL" : "SIGSTOP");
        raise(sig);
}
#endif
