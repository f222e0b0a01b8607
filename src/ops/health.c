/* health: what /healthz and /readyz answer — the main loop's heartbeat, the database, the broker, the group, stuck topics. */
#include "ops/health.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "ops/metrics.h"

static struct {
        pthread_mutex_t lock;
        int64_t stall_ms, beat_ms;
        int db_up, joined;
        int broker_down;
        char broker_why[512]; /* the source's words, while broker_down */
        size_t partitions, topics;
        char **names;
        int *stuck;
} h = {.lock = PTHREAD_MUTEX_INITIALIZER};

void health_init(int64_t stall_ms, size_t topics, const char *const *topic_names)
{
        pthread_mutex_lock(&h.lock);
        h.stall_ms = stall_ms;
        h.topics = topics;
        h.names = xcalloc(topics ? topics : 1, sizeof(*h.names));
        h.stuck = xcalloc(topics ? topics : 1, sizeof(*h.stuck));
        for (size_t t = 0; t < topics; t++)
                h.names[t] = xstrdup(topic_names[t]);
        pthread_mutex_unlock(&h.lock);
}

void health_free(void)
{
        pthread_mutex_lock(&h.lock);
        for (size_t t = 0; t < h.topics; t++)
                free(h.names[t]);
        free(h.names);
        free(h.stuck);
        h.names = NULL;
        h.stuck = NULL;
        h.topics = 0;
        pthread_mutex_unlock(&h.lock);
}

/* Set a field under the lock; readiness as a metric too. */
#define UPDATE(stmt)                                                                                                   \
        do {                                                                                                           \
                pthread_mutex_lock(&h.lock);                                                                           \
                stmt;                                                                                                  \
                pthread_mutex_unlock(&h.lock);                                                                         \
        } while (0)

void health_beat(int64_t now_ms) { UPDATE(h.beat_ms = now_ms); }
void health_db(int up) { UPDATE(h.db_up = up); }
void health_broker(int up, const char *why)
{
        UPDATE((h.broker_down = !up, snprintf(h.broker_why, sizeof(h.broker_why), "%s", up || !why ? "" : why)));
}
void health_assigned(size_t partitions) { UPDATE((h.joined = 1, h.partitions = partitions)); }
void health_unassigned(void) { UPDATE((h.joined = 0, h.partitions = 0)); }
void health_stuck(size_t t, int stuck) { UPDATE(if (t < h.topics) h.stuck[t] = stuck); }

int health_alive(int64_t now_ms, char *why, size_t whysz)
{
        pthread_mutex_lock(&h.lock);
        int64_t since = now_ms - h.beat_ms;
        int alive = h.beat_ms && since <= h.stall_ms;
        pthread_mutex_unlock(&h.lock);
        if (!alive)
                snprintf(why, whysz, "the main loop has not run for %" PRId64 " ms (at most %" PRId64 " allowed)",
                         h.beat_ms ? since : -1, h.stall_ms);
        return alive;
}

static void add_reason(char *why, size_t whysz, size_t *at, const char *text)
{
        if (*at < whysz)
                *at += (size_t)snprintf(why + *at, whysz - *at, "%s%s", *at ? "; " : "", text);
}

int health_ready(int64_t now_ms, char *why, size_t whysz)
{
        char alive_why[160], line[600];
        size_t at = 0;
        why[0] = '\0';
        if (!health_alive(now_ms, alive_why, sizeof(alive_why)))
                add_reason(why, whysz, &at, alive_why);
        pthread_mutex_lock(&h.lock);
        if (!h.db_up)
                add_reason(why, whysz, &at, "the database is unreachable");
        if (h.broker_down) {
                snprintf(line, sizeof(line), "the broker is unreachable%s%s", h.broker_why[0] ? ": " : "",
                         h.broker_why);
                add_reason(why, whysz, &at, line);
        }
        if (!h.joined)
                add_reason(why, whysz, &at, "not in the consumer group yet (no assignment)");
        for (size_t t = 0; t < h.topics; t++)
                if (h.stuck[t]) {
                        snprintf(line, sizeof(line), "topic %s is stuck retrying a batch", h.names[t]);
                        add_reason(why, whysz, &at, line);
                }
        pthread_mutex_unlock(&h.lock);
        metrics_ready(at == 0);
        return at == 0;
}
