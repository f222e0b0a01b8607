/* instance: this process as the crash-loop ledger knows it — its owner id and the liveness lease it keeps in dedupd.instances. */
#include "core/instance.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "pg/instances.h"

#define LEASE_SLACK_MS 30000

/* One daemon: process-wide state. Partition workers count batch starts on
 * their own connections, so it is locked; the row names whichever of this
 * process's sessions registered last (every one of them is alive while it
 * is used). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t owner_once = PTHREAD_ONCE_INIT;
static struct {
        char owner[320];
        int backend;        /* store_session_pid of the session registered from, 0: none */
        int64_t renewed_ms; /* log_now_ms() of the last registration */
        struct log_ratelimit rl;
} inst;

static void make_owner(void)
{
        char host[256];
        unsigned char rnd[4];
        if (gethostname(host, sizeof(host)) != 0)
                snprintf(host, sizeof(host), "unknown");
        host[sizeof(host) - 1] = '\0';
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                /* Only the pid is then left to tell restarts apart; add the time. */
                uint32_t x = (uint32_t)time(NULL) ^ (uint32_t)log_now_ms();
                memcpy(rnd, &x, sizeof(rnd));
        }
        snprintf(inst.owner, sizeof(inst.owner), "%s:%ld:%02x%02x%02x%02x", host, (long)getpid(), rnd[0], rnd[1],
                 rnd[2], rnd[3]);
}

const char *instance_owner(void)
{
        pthread_once(&owner_once, make_owner);
        return inst.owner;
}

int64_t instance_lease_ms(const struct config *cfg)
{
        int64_t longest = 0;
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                if (cfg->topics[i].batch_timeout_ms > longest)
                        longest = cfg->topics[i].batch_timeout_ms;
        return 2 * longest + LEASE_SLACK_MS;
}

static int registered_here(const struct store *s)
{
        return inst.backend && store_ok(s) && store_session_pid(s) == inst.backend;
}

static int renew(struct store *s, const struct config *cfg, char *err, size_t errsz)
{
        if (store_instance_register(s, instance_owner(), cfg->namespace, instance_lease_ms(cfg), err, errsz)) {
                inst.backend = 0;
                return -1;
        }
        inst.backend = store_session_pid(s);
        inst.renewed_ms = log_now_ms();
        return 0;
}

int instance_ensure(struct store *s, const struct config *cfg, char *err, size_t errsz)
{
        pthread_mutex_lock(&lock);
        int rc = registered_here(s) ? 0 : renew(s, cfg, err, errsz);
        pthread_mutex_unlock(&lock);
        return rc;
}

void instance_tick(struct store *s, const struct config *cfg, int64_t now_ms)
{
        char err[512];
        if (!store_idle(s))
                return;
        pthread_mutex_lock(&lock);
        if (!(registered_here(s) && now_ms - inst.renewed_ms < instance_lease_ms(cfg) / 6) &&
            renew(s, cfg, err, sizeof(err)))
                log_limited(&inst.rl, 1, 60000, LOG_WARN, "instance",
                            "cannot renew this instance's lease in dedupd.instances: %s (retrying)", err);
        pthread_mutex_unlock(&lock);
}

void instance_leave(struct store *s)
{
        char err[512];
        pthread_mutex_lock(&lock);
        if (inst.backend && store_ok(s)) {
                if (store_instance_leave(s, instance_owner(), err, sizeof(err)))
                        log_warn("instance", "cannot remove this instance from dedupd.instances: %s", err);
                inst.backend = 0;
        }
        pthread_mutex_unlock(&lock);
}
