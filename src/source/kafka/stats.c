/* stats: librdkafka's statistics (statistics.interval.ms) — consumer lag per partition into the metrics, and whether a broker is up. */
#include "source/kafka/stats.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ops/metrics.h"

/* {"topics": {"t": {"partitions": {"0": {"consumer_lag": 12}, "-1": {...}}}}}:
 * -1 is librdkafka's internal partition, and a lag of -1 means not known yet. */
static void apply_topic(const char *topic, json_t *t)
{
        const char *part;
        json_t *p;
        json_object_foreach(json_object_get(t, "partitions"), part, p)
        {
                char *end;
                long id = strtol(part, &end, 10);
                json_t *lag = json_object_get(p, "consumer_lag");
                if (*end || id < 0 || !json_is_integer(lag) || json_integer_value(lag) < 0)
                        continue;
                metrics_lag(topic, (int32_t)id, json_integer_value(lag));
        }
}

int kafka_stats_apply(const char *json, size_t len)
{
        json_t *root = json_loadb(json, len, 0, NULL), *t;
        const char *topic;
        if (!root)
                return -1;
        json_object_foreach(json_object_get(root, "topics"), topic, t) apply_topic(topic, t);
        json_decref(root);
        return 0;
}

int kafka_stats_brokers_up(const char *json, size_t len)
{
        json_t *root = json_loadb(json, len, 0, NULL), *b;
        const char *name;
        int up = 0;
        if (!root)
                return -1;
        json_object_foreach(json_object_get(root, "brokers"), name, b)
        {
                const char *state = json_string_value(json_object_get(b, "state"));
                const char *source = json_string_value(json_object_get(b, "source"));
                up += state && !strcmp(state, "UP") && !(source && !strcmp(source, "internal"));
        }
        json_decref(root);
        return up;
}

int kafka_stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
        (void)rk;
        (void)opaque;
        kafka_stats_apply(json, len);
        return 0;
}
