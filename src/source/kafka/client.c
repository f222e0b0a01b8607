/* client: the one place librdkafka clients are built from the config — the kafka: map, dedupd's own settings, logging. */
#include "source/kafka/client.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "source/kafka/log_transient.h"
#include "source/kafka/settings.h"

static const char *const consumer_props[] = {
        "group.id",
        "group.instance.id",
        "auto.offset.reset",
        "enable.auto.commit",
        "auto.commit.interval.ms",
        "enable.auto.offset.store",
        "session.timeout.ms",
        "max.poll.interval.ms",
        "heartbeat.interval.ms",
        "partition.assignment.strategy",
        "fetch.min.bytes",
        "fetch.max.bytes",
        "fetch.wait.max.ms",
        "max.partition.fetch.bytes",
        "fetch.message.max.bytes",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "enable.partition.eof",
        "check.crcs",
        "isolation.level",
        "group.protocol.type",
        "coordinator.query.interval.ms",
        "allow.auto.create.topics",
        "auto.commit.enable",
        "offset.store.method",
        "consume.callback.max.messages",
        "client.rack",
};

int kafka_is_consumer_property(const char *name)
{
        for (size_t i = 0; i < sizeof(consumer_props) / sizeof(*consumer_props); i++)
                if (!strcmp(name, consumer_props[i]))
                        return 1;
        return 0;
}

const char *kafka_property(const struct config *cfg, const char *name)
{
        return config_kvs_get(kafka_props(cfg), name);
}

int kafka_user_set(const struct config *cfg, const char *name) { return kafka_property(cfg, name) != NULL; }

const char *kafka_bootstrap(const struct config *cfg)
{
        const char *b = kafka_property(cfg, "bootstrap.servers");
        if (!b)
                b = kafka_property(cfg, "metadata.broker.list");
        return b ? b : "BROKER";
}

int kafka_err_unreachable(rd_kafka_resp_err_t e)
{
        switch (e) {
        case RD_KAFKA_RESP_ERR__TRANSPORT:
        case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
        case RD_KAFKA_RESP_ERR__RESOLVE:
        case RD_KAFKA_RESP_ERR__TIMED_OUT:
        case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
        case RD_KAFKA_RESP_ERR__WAIT_COORD:
        case RD_KAFKA_RESP_ERR__SSL:
        case RD_KAFKA_RESP_ERR__AUTHENTICATION: return 1;
        default: return 0;
        }
}

/* librdkafka's syslog levels onto dedupd's. */
static int level_of(int syslog_level)
{
        return syslog_level <= 3 ? LOG_ERROR : syslog_level == 4 ? LOG_WARN : syslog_level <= 6 ? LOG_INFO : LOG_DEBUG;
}

/* When the process built its first client: the start a fresh broker's transient lines count from. */
static _Atomic int64_t first_client_ms;

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
        const char *name = rd_kafka_name(rk);
        int lvl = kafka_log_transient(buf, log_now_ms() - first_client_ms) ? LOG_DEBUG : level_of(level);
        LOG(lvl, strstr(name, "producer") ? "kafka:producer" : "kafka", "%s: %s", fac, buf);
}

static void quiet_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
        (void)rk;
        (void)level;
        log_debug("kafka", "%s: %s", fac, buf);
}

rd_kafka_conf_t *kafka_conf(const struct config *cfg, enum kafka_role role, const char *const *extra, char *err,
                            size_t errsz)
{
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        const struct config_kvs *props = kafka_props(cfg);
        int64_t unset = 0;
        atomic_compare_exchange_strong(&first_client_ms, &unset, log_now_ms());
        for (size_t i = 0; i < props->n; i++) {
                if (role != KAFKA_ROLE_CONSUMER && kafka_is_consumer_property(props->v[i].name))
                        continue;
                if (rd_kafka_conf_set(conf, props->v[i].name, props->v[i].value, err, errsz) != RD_KAFKA_CONF_OK)
                        goto error;
        }
        for (size_t i = 0; extra && extra[i]; i += 2)
                if (rd_kafka_conf_set(conf, extra[i], extra[i + 1], err, errsz) != RD_KAFKA_CONF_OK)
                        goto error;
        rd_kafka_conf_set_log_cb(conf, role == KAFKA_ROLE_ADMIN ? quiet_log_cb : log_cb);
        return conf;
error:
        rd_kafka_conf_destroy(conf);
        return NULL;
}

rd_kafka_t *kafka_client(const struct config *cfg, rd_kafka_type_t type, enum kafka_role role, const char *group,
                         char *err, size_t errsz)
{
        const char *const with_group[] = {"group.id", group, "enable.auto.commit", "false", "enable.auto.offset.store",
                                          "false",    NULL};
        rd_kafka_conf_t *conf = kafka_conf(cfg, role, group ? with_group : NULL, err, errsz);
        rd_kafka_t *rk;
        if (!conf)
                return NULL;
        rk = rd_kafka_new(type, conf, err, errsz);
        if (!rk)
                rd_kafka_conf_destroy(conf); /* on success conf is owned by rk */
        return rk;
}

int kafka_partition_count(rd_kafka_t *rk, const char *topic, char *err, size_t errsz)
{
        const struct rd_kafka_metadata *md;
        rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
        rd_kafka_resp_err_t e;
        int n = -1;

        if (!t) {
                snprintf(err, errsz, "topic %s: %s", topic, rd_kafka_err2str(rd_kafka_last_error()));
                return -1;
        }
        e = rd_kafka_metadata(rk, 0, t, &md, KAFKA_TIMEOUT_MS);
        if (e) {
                snprintf(err, errsz, "cannot read the metadata of topic %s: %s", topic, rd_kafka_err2str(e));
        } else {
                if (md->topic_cnt != 1 || md->topics[0].err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
                        snprintf(err, errsz, "topic %s does not exist", topic);
                else if (md->topics[0].err)
                        snprintf(err, errsz, "topic %s: %s", topic, rd_kafka_err2str(md->topics[0].err));
                else
                        n = md->topics[0].partition_cnt;
                rd_kafka_metadata_destroy(md);
        }
        rd_kafka_topic_destroy(t);
        return n;
}
