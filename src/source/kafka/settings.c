/* settings: Kafka's own part of the configuration — the `kafka:` map of librdkafka properties, its rows and its checks. */
#include "source/kafka/settings.h"

#include <stddef.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

static const char *const required_props[] = {"bootstrap.servers", "group.id", NULL};

static const struct field rows[] = {
        {.name = "kafka",
         .importance = 1,
         .type = F_KV,
         .off = offsetof(struct kafka_settings, props),
         .secret_key = kafka_secret_property,
         .keys_required = required_props,
         .desc = "librdkafka properties passed verbatim (bootstrap.servers and group.id required); required "
                 "with source: kafka"},
        {.name = NULL},
};

int kafka_secret_property(const char *name)
{
        return strstr(name, "password") || strstr(name, "secret") || strstr(name, "sasl.jaas") ||
               strstr(name, "ssl.key.pem") || strstr(name, "oauthbearer.config");
}

const struct config_kvs *kafka_props(const struct config *cfg)
{
        const struct kafka_settings *k = config_settings_of(cfg, &kafka_config);
        return &k->props;
}

/* A property dedupd owns (setting it would break the guarantee), or one
 * librdkafka refuses; 1 when one was said. */
static int refused_property(struct config_checks *w, rd_kafka_conf_t *conf, const struct config_kv *kv)
{
        char errstr[512];
        if (!strcmp(kv->name, "enable.auto.offset.store")) {
                config_errors_add(w->errs, w->file, kv->line, kv->col,
                                  "kafka.enable.auto.offset.store: dedupd stores offsets itself, only after the "
                                  "database COMMIT; remove this key");
                return 1;
        }
        if (!strcmp(kv->name, "partition.assignment.strategy") && strstr(kv->value, "cooperative")) {
                config_errors_add(w->errs, w->file, kv->line, kv->col,
                                  "kafka.partition.assignment.strategy: cooperative-sticky has known bugs in "
                                  "librdkafka 2.0.x; use range or roundrobin");
                return 1;
        }
        if (rd_kafka_conf_set(conf, kv->name, kv->value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
                config_errors_add(w->errs, w->file, kv->line, kv->col, "kafka.%s: %s", kv->name, errstr);
                return 1;
        }
        return 0;
}

/* The two properties dedupd needs: there, and not "" (or a ${VAR} that came out empty). */
static void check_props(struct config_checks *w, const struct config_kvs *props)
{
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        int have_bootstrap = config_checks_refused(w, "kafka.bootstrap.servers"),
            have_group = config_checks_refused(w, "kafka.group.id");
        for (size_t i = 0; i < props->n; i++) {
                const struct config_kv *kv = &props->v[i];
                int bootstrap = !strcmp(kv->name, "bootstrap.servers") || !strcmp(kv->name, "metadata.broker.list");
                int group = !strcmp(kv->name, "group.id");
                have_bootstrap |= bootstrap;
                have_group |= group;
                if ((bootstrap || group) && !*kv->value)
                        config_errors_add(w->errs, w->file, kv->line, kv->col,
                                          "'kafka.%s' is empty: a value is required", kv->name);
                else
                        refused_property(w, conf, kv);
        }
        rd_kafka_conf_destroy(conf);
        if (!have_bootstrap)
                config_errors_add(w->errs, w->file, props->line, props->col,
                                  "missing required key 'kafka.bootstrap.servers'");
        if (!have_group)
                config_errors_add(w->errs, w->file, props->line, props->col, "missing required key 'kafka.group.id'");
}

static void check(struct config_checks *w, void *settings)
{
        const struct kafka_settings *k = settings;
        if (!w->given)
                config_errors_add(w->errs, w->file, w->source_line, w->source_col, "missing required key 'kafka'");
        else if (k->props.seen)
                check_props(w, &k->props);
}

const struct config_broker kafka_config = {
        .name = "kafka",
        .title = "Kafka",
        .rows = rows,
        .settings_size = sizeof(struct kafka_settings),
        .check = check,
};
