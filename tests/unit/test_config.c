/* test_config: the YAML configuration as an operator meets it — what loads,
 * what the defaults are, and where (file:line:column) every mistake is reported. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "source/kafka/settings.h"
#include "source/nats/settings.h"
#include "source/rabbitmq/settings.h"
#include "base/config.h"
#include "base/keyspec.h"
#include "base/log.h"
#include "unit.h"

#ifndef FIXTURE_CONFIG_DIR
#error "FIXTURE_CONFIG_DIR must be defined by the build"
#endif

/* ---- helpers ------------------------------------------------------------- */

static void print_errors(const struct config_errors *errs)
{
        print_message("%zu error(s):\n", errs->cnt);
        for (size_t i = 0; i < errs->cnt; i++)
                print_message("  %s\n", errs->msgs[i]);
}

/* Loads yaml that must be valid; fails the test with every message otherwise. */
static struct config *load_ok(const char *yaml)
{
        struct config_errors errs = {0};
        struct config *cfg = config_load_string("t.yaml", yaml, &errs);
        if (!cfg || errs.cnt) {
                print_errors(&errs);
                config_errors_clear(&errs);
                config_free(cfg);
                fail_msg("the config was expected to load");
        }
        return cfg;
}

/* Loads yaml that must be refused; the messages are left in errs. */
static void load_bad(const char *yaml, struct config_errors *errs)
{
        struct config *cfg = config_load_string("t.yaml", yaml, errs);
        if (cfg) {
                config_free(cfg);
                config_errors_clear(errs);
                fail_msg("the config loaded, but it was expected to be refused");
        }
        if (!errs->cnt)
                fail_msg("refused without any message");
}

/* The message starting with prefix (and containing phrase, when given). */
static const char *find_error(const struct config_errors *errs, const char *prefix, const char *phrase)
{
        for (size_t i = 0; i < errs->cnt; i++)
                if (!strncmp(errs->msgs[i], prefix, strlen(prefix)) && (!phrase || strstr(errs->msgs[i], phrase)))
                        return errs->msgs[i];
        return NULL;
}

#define assert_error(errs, prefix, phrase)                                                                             \
        do {                                                                                                           \
                if (!find_error((errs), (prefix), (phrase))) {                                                         \
                        print_errors(errs);                                                                            \
                        fail_msg("no error starting \"%s\"%s%s%s", (prefix), (phrase) ? " containing \"" : "",         \
                                 (phrase) ? (const char *)(phrase) : "", (phrase) ? "\"" : "");                        \
                }                                                                                                      \
        } while (0)

static void derive_key(const struct keyspec *ks, const char *payload, const char *kafka_key,
                       const struct dedupd_header *hdrs, size_t hcnt, char *out)
{
        char err[512];
        struct record in = {.value = payload,
                            .value_len = payload ? strlen(payload) : 0,
                            .key = kafka_key,
                            .key_len = kafka_key ? strlen(kafka_key) : 0,
                            .headers = hdrs,
                            .header_cnt = hcnt};
        assert_non_null(ks);
        if (keyspec_derive(ks, &in, out, KEYSPEC_MAX_KEY_LEN + 1, err, sizeof(err)))
                fail_msg("key derivation failed: %s", err);
}

/* ---- a valid configuration ------------------------------------------------- */

static const char full_yaml[] = "# dedupd, two topics\n"                         /*  1 */
                                "namespace: payments-service\n"                  /*  2 */
                                "log_level: debug\n"                             /*  3 */
                                "postgres:\n"                                    /*  4 */
                                "  conninfo: \"host=127.0.0.1 dbname=dedupd\"\n" /*  5 */
                                "kafka:\n"                                       /*  6 */
                                "  bootstrap.servers: \"127.0.0.1:9092\"\n"      /*  7 */
                                "  group.id: payments-dedupd\n"                  /*  8 */
                                "  session.timeout.ms: \"30000\"\n"              /*  9 */
                                "topics:\n"                                      /* 10 */
                                "  - name: payments\n"                           /* 11 */
                                "    key:\n"                                     /* 12 */
                                "      subject: \"{json:order_id}\"\n"           /* 13 */
                                "      action: PAY\n"                            /* 14 */
                                "      request: \"{header:request-id}\"\n"       /* 15 */
                                "    handler:\n"                                 /* 16 */
                                "      path: ./transfer.so\n"                    /* 17 */
                                "      config:\n"                                /* 18 */
                                "        seed_accounts: 100\n"                   /* 19 */
                                "        accounts:\n"                            /* 20 */
                                "          initial_balance: \"1000\"\n"          /* 21 */
                                "          currency: EUR\n"                      /* 22 */
                                "        regions: [eu, us]\n"                    /* 23 */
                                "  - name: refunds\n"                            /* 24 */
                                "    key:\n"                                     /* 25 */
                                "      subject: \"refund-{key}\"\n"              /* 26 */
                                "    handler:\n"                                 /* 27 */
                                "      path: ./refund.so\n"                      /* 28 */
                                "    batch:\n"                                   /* 29 */
                                "      max_messages: 10\n"                       /* 30 */
                                "      max_wait_ms: 0\n"                         /* 31 */
                                "    retry:\n"                                   /* 32 */
                                "      max_attempts: 1\n"                        /* 33 */
                                "      backoff_ms: 500\n"                        /* 34 */
                                "      backoff_max_ms: 100\n"                    /* 35 */
                                "    dead_letter:\n"                             /* 36 */
                                "      topic: refunds-dead\n"                    /* 37 */
                                "    max_payload_bytes: 2048\n"                  /* 38 */
                                "log_format: json\n"                             /* 39 */
                                "startup_timeout_ms: 20000\n";                   /* 40 */

static void valid_full_config(void **state)
{
        struct config *cfg = load_ok(full_yaml);

        assert_string_equal(cfg->path, "t.yaml");
        assert_string_equal(cfg->namespace, "payments-service");
        assert_string_equal(cfg->pg_conninfo, "host=127.0.0.1 dbname=dedupd");
        assert_int_equal(cfg->log_level, LOG_DEBUG);
        assert_int_equal(cfg->log_format, LOG_FORMAT_JSON);
        assert_int_equal(cfg->startup_timeout_ms, 20000);
        assert_int_equal(cfg->shutdown_timeout_ms, 10000);
        assert_int_equal(cfg->db_retry_max_ms, 5000);

        /* kafka: passed through verbatim, in file order, with their positions */
        assert_int_equal(kafka_props(cfg)->n, 3);
        assert_string_equal(kafka_props(cfg)->v[0].name, "bootstrap.servers");
        assert_string_equal(kafka_props(cfg)->v[0].value, "127.0.0.1:9092");
        assert_int_equal(kafka_props(cfg)->v[0].line, 7);
        assert_string_equal(kafka_props(cfg)->v[1].name, "group.id");
        assert_string_equal(kafka_props(cfg)->v[1].value, "payments-dedupd");
        assert_string_equal(kafka_props(cfg)->v[2].name, "session.timeout.ms");
        assert_string_equal(kafka_props(cfg)->v[2].value, "30000");
        assert_int_equal(kafka_props(cfg)->v[2].line, 9);
        assert_int_equal(kafka_props(cfg)->v[2].col, 23);

        assert_int_equal(cfg->topic_cnt, 2);

        /* payments: everything not written takes its default */
        struct topic_conf *t = config_topic(cfg, "payments");
        assert_ptr_equal(t, &cfg->topics[0]);
        assert_string_equal(t->name, "payments");
        assert_int_equal(t->line, 11);
        assert_string_equal(t->key_subject, "{json:order_id}");
        assert_string_equal(t->key_action, "PAY");
        assert_string_equal(t->key_request, "{header:request-id}");
        assert_non_null(t->keyspec);
        assert_true(keyspec_needs_json(t->keyspec));
        assert_string_equal(t->handler_path, "./transfer.so");
        assert_int_equal(t->batch_max_messages, 500);
        assert_int_equal(t->batch_max_wait_ms, 100);
        assert_int_equal(t->retry_max_attempts, 5);
        assert_int_equal(t->retry_backoff_ms, 200);
        assert_int_equal(t->retry_backoff_max_ms, 10000);
        assert_string_equal(t->dlq_topic, "payments.dlq");
        assert_int_equal(t->max_payload_bytes, 1000000);

        /* the handler's subtree: scalars as strings, by dotted path */
        assert_non_null(t->handler_config);
        assert_string_equal(config_tree_get(t->handler_config, "seed_accounts"), "100");
        assert_string_equal(config_tree_get(t->handler_config, "accounts.initial_balance"), "1000");
        assert_string_equal(config_tree_get(t->handler_config, "accounts.currency"), "EUR");
        assert_null(config_tree_get(t->handler_config, "accounts")); /* not a scalar */
        assert_null(config_tree_get(t->handler_config, "regions"));  /* a list */
        assert_null(config_tree_get(t->handler_config, "accounts.missing"));
        assert_null(config_tree_get(t->handler_config, "seed_accounts.deeper"));
        assert_null(config_tree_get(NULL, "seed_accounts"));
        json_t *regions = json_object_get(t->handler_config, "regions");
        assert_true(json_is_array(regions));
        assert_int_equal(json_array_size(regions), 2);
        assert_string_equal(json_string_value(json_array_get(regions, 1)), "us");

        /* the compiled key is subject/action/request */
        char key[KEYSPEC_MAX_KEY_LEN + 1];
        struct dedupd_header h = {"request-id", "req-7", 5};
        derive_key(t->keyspec, "{\"order_id\": \"o-1\"}", NULL, &h, 1, key);
        assert_string_equal(key, "o-1/PAY/req-7");

        /* refunds: every default overridden */
        t = config_topic(cfg, "refunds");
        assert_ptr_equal(t, &cfg->topics[1]);
        assert_null(t->key_action);
        assert_null(t->key_request);
        assert_false(keyspec_needs_json(t->keyspec));
        assert_null(t->handler_config);
        assert_int_equal(t->batch_max_messages, 10);
        assert_int_equal(t->batch_max_wait_ms, 0);
        assert_int_equal(t->retry_max_attempts, 1);
        assert_int_equal(t->retry_backoff_ms, 500);
        assert_int_equal(t->retry_backoff_max_ms, 500); /* raised to backoff_ms */
        assert_string_equal(t->dlq_topic, "refunds-dead");
        assert_int_equal(t->max_payload_bytes, 2048);
        derive_key(t->keyspec, NULL, "42", NULL, 0, key); /* a tombstone is fine: no JSON */
        assert_string_equal(key, "refund-42");

        assert_null(config_topic(cfg, "payments.dlq"));
        config_free(cfg);
}

static void minimal_config_defaults(void **state)
{
        struct config *cfg = load_ok("namespace: svc\n"
                                     "postgres: {conninfo: \"dbname=x\"}\n"
                                     "kafka: {bootstrap.servers: \"b:9092\", group.id: g}\n"
                                     "topics:\n"
                                     "  - {name: t, key: {subject: \"{key}\"}, handler: {path: h.so}}\n");
        assert_int_equal(cfg->log_level, LOG_INFO);
        assert_int_equal(cfg->log_format, LOG_FORMAT_HUMAN);
        assert_int_equal(cfg->startup_timeout_ms, 60000);
        assert_int_equal(cfg->shutdown_timeout_ms, 10000);
        assert_int_equal(cfg->db_retry_max_ms, 5000);
        assert_int_equal(kafka_props(cfg)->n, 2);
        assert_int_equal(cfg->topic_cnt, 1);
        assert_string_equal(cfg->topics[0].dlq_topic, "t.dlq");
        assert_int_equal(cfg->topics[0].batch_max_messages, 500);
        assert_int_equal(cfg->topics[0].batch_max_wait_ms, 100);
        assert_int_equal(cfg->topics[0].retry_max_attempts, 5);
        assert_int_equal(cfg->topics[0].max_payload_bytes, 1000000);
        /* limits: */
        assert_int_equal(cfg->limit_payload_bytes, 1000000);
        assert_int_equal(cfg->limit_key_bytes, 4096);
        assert_int_equal(cfg->limit_json_depth, 64);
        assert_int_equal(cfg->limit_headers, 64);
        assert_int_equal(cfg->limit_batch_bytes, 64 * 1024 * 1024);
        assert_int_equal(cfg->limit_outbox_backlog, 100000);
        /* http: off, and bounded when on */
        assert_string_equal(cfg->http_listen, "");
        assert_int_equal(cfg->http_max_connections, 128);
        assert_int_equal(cfg->http_max_connections_per_ip, 8);
        assert_int_equal(cfg->http_idle_timeout_s, 10);
        config_free(cfg);
}

/* limits.payload_bytes is every topic's default; a topic's own max_payload_bytes
 * (the key that existed before limits:) still wins, and the reason names it. */
static void limits_payload_inherited_or_own(void **state)
{
        struct config *cfg =
                load_ok("namespace: svc\n"
                        "postgres: {conninfo: \"dbname=x\"}\n"
                        "kafka: {bootstrap.servers: \"b:9092\", group.id: g}\n"
                        "limits: {payload_bytes: 2000, key_bytes: 100, json_depth: 3, headers: 2,"
                        " batch_bytes: 4096, outbox_backlog: 0}\n"
                        "topics:\n"
                        "  - {name: a, key: {subject: \"{key}\"}, handler: {path: h.so}}\n"
                        "  - {name: b, key: {subject: \"{key}\"}, handler: {path: h.so}, max_payload_bytes: 300}\n");
        assert_int_equal(cfg->topics[0].max_payload_bytes, 2000);
        assert_false(cfg->topics[0].payload_bytes_own);
        assert_int_equal(cfg->topics[1].max_payload_bytes, 300);
        assert_true(cfg->topics[1].payload_bytes_own);
        assert_int_equal(cfg->limit_key_bytes, 100);
        assert_int_equal(cfg->limit_json_depth, 3);
        assert_int_equal(cfg->limit_headers, 2);
        assert_int_equal(cfg->limit_batch_bytes, 4096);
        assert_int_equal(cfg->limit_outbox_backlog, 0);
        config_free(cfg);
}

/* source: rabbitmq needs no kafka: section; the rabbitmq: one has defaults,
 * {amqp:...} keys load, and the URL is never printed. */
static void rabbitmq_config_defaults(void **state)
{
        (void)state;
        struct config *cfg = load_ok("namespace: svc\n"
                                     "postgres: {conninfo: \"dbname=x\"}\n"
                                     "source: rabbitmq\n"
                                     "rabbitmq: {url: \"amqp://u:s3cret@h:5672/v\"}\n"
                                     "topics:\n"
                                     "  - {name: q, key: {subject: \"{amqp:message_id}\"}, handler: {path: h.so}}\n");
        assert_string_equal(config_source_name(cfg), "rabbitmq");
        assert_string_equal(rmq_conf(cfg)->url, "amqp://u:s3cret@h:5672/v");
        assert_int_equal(rmq_conf(cfg)->prefetch, 1000);
        assert_int_equal(rmq_conf(cfg)->heartbeat_s, 30);
        assert_string_equal(rmq_conf(cfg)->dlx, "");
        assert_int_equal(kafka_props(cfg)->n, 0);
        assert_true(keyspec_reads_amqp(cfg->topics[0].keyspec));
        char *dump = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&dump, &len);
        config_dump(cfg, fp);
        fclose(fp);
        assert_non_null(strstr(dump, "rabbitmq.url: (set, not shown)\n"));
        assert_null(strstr(dump, "s3cret"));
        free(dump);
        config_free(cfg);
}

#define Y_RMQ_WITH(extra)                                                                                              \
        "namespace: svc\npostgres: {conninfo: \"dbname=x\"}\nsource: rabbitmq\nrabbitmq:\n"                            \
        "  url: amqp://u:p@h:5672/v\n" extra                                                                           \
        "topics:\n  - {name: q, key: {subject: \"{json:id}\"}, handler: {path: h.so}}\n"
/* rabbitmq.management_url: "" by default (the TTLs are not checked); set, it
 * loads as written and config_dump shows it set, never its password. */
static void rabbitmq_management_url_is_secret(void **state)
{
        (void)state;
        struct config *cfg = load_ok(Y_RMQ_WITH(""));
        assert_string_equal(rmq_conf(cfg)->management_url, "");
        config_free(cfg);
        cfg = load_ok(Y_RMQ_WITH("  management_url: \"https://mon:Mgmt5ecret@h:15671/rmq\"\n"));
        assert_string_equal(rmq_conf(cfg)->management_url, "https://mon:Mgmt5ecret@h:15671/rmq");
        char *dump = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&dump, &len);
        config_dump(cfg, fp);
        fclose(fp);
        assert_non_null(strstr(dump, "rabbitmq.management_url: (set, not shown)\n"));
        assert_null(strstr(dump, "Mgmt5ecret"));
        free(dump);
        config_free(cfg);
}

static void env_substitution(void **state)
{
        setenv("DEDUPD_TEST_HOST", "db.internal", 1);
        setenv("DEDUPD_TEST_GROUP", "", 1);
        setenv("DEDUPD_TEST_ACTION", "SHIP", 1);
        unsetenv("DEDUPD_TEST_NS");
        unsetenv("DEDUPD_TEST_TOPIC");
        unsetenv("DEDUPD_TEST_DIR");
        struct config *cfg = load_ok("namespace: \"${DEDUPD_TEST_NS:-default-ns}\"\n"
                                     "postgres:\n"
                                     "  conninfo: \"host=${DEDUPD_TEST_HOST} password=pa$$word$\"\n"
                                     "kafka:\n"
                                     "  bootstrap.servers: \"${DEDUPD_TEST_HOST}:9092\"\n"
                                     "  group.id: \"${DEDUPD_TEST_GROUP:-fallback-group}\"\n"
                                     "topics:\n"
                                     "  - name: \"${DEDUPD_TEST_TOPIC:-orders}\"\n"
                                     "    key:\n"
                                     "      subject: \"{json:id}\"\n"
                                     "      action: \"${DEDUPD_TEST_ACTION:-PAY}\"\n"
                                     "    handler:\n"
                                     "      path: \"${DEDUPD_TEST_DIR:-build}/h.so\"\n"
                                     "      config:\n"
                                     "        db: \"${DEDUPD_TEST_HOST}\"\n"
                                     "        list: [\"${DEDUPD_TEST_ACTION}\"]\n"
                                     "    max_payload_bytes: \"${DEDUPD_TEST_UNSET:-4096}\"\n");

        assert_string_equal(cfg->namespace, "default-ns");                            /* unset: default */
        assert_string_equal(cfg->pg_conninfo, "host=db.internal password=pa$$word$"); /* bare $ kept */
        assert_string_equal(kafka_props(cfg)->v[0].value, "db.internal:9092");        /* set: substituted */
        assert_string_equal(kafka_props(cfg)->v[1].value, "fallback-group");          /* set but empty: default */
        assert_string_equal(cfg->topics[0].name, "orders");
        assert_string_equal(cfg->topics[0].dlq_topic, "orders.dlq");
        assert_string_equal(cfg->topics[0].key_action, "SHIP");
        assert_string_equal(cfg->topics[0].handler_path, "build/h.so");
        assert_int_equal(cfg->topics[0].max_payload_bytes, 4096);
        assert_string_equal(config_tree_get(cfg->topics[0].handler_config, "db"), "db.internal");
        json_t *list = json_object_get(cfg->topics[0].handler_config, "list");
        assert_string_equal(json_string_value(json_array_get(list, 0)), "SHIP");

        char key[KEYSPEC_MAX_KEY_LEN + 1];
        derive_key(cfg->topics[0].keyspec, "{\"id\": 9}", NULL, NULL, 0, key);
        assert_string_equal(key, "9/SHIP");
        config_free(cfg);
        unsetenv("DEDUPD_TEST_GROUP");
        unsetenv("DEDUPD_TEST_ACTION");
}

static void load_from_file(void **state)
{
        struct config_errors errs = {0};
        struct config *cfg = config_load(FIXTURE_CONFIG_DIR "/full.yaml", &errs);
        if (!cfg)
                print_errors(&errs);
        assert_non_null(cfg);
        assert_int_equal(errs.cnt, 0);
        assert_string_equal(cfg->path, FIXTURE_CONFIG_DIR "/full.yaml");
        assert_string_equal(cfg->namespace, "payments-service");
        assert_int_equal(cfg->shutdown_timeout_ms, 2500);
        assert_int_equal(cfg->db_retry_max_ms, 1000);
        assert_int_equal(cfg->topic_cnt, 2);
        assert_string_equal(config_tree_get(config_topic(cfg, "payments")->handler_config, "accounts.initial_balance"),
                            "1000");
        assert_int_equal(kafka_props(cfg)->v[2].line, 12);
        config_free(cfg);
}

static void file_errors_name_the_file(void **state)
{
        struct config_errors errs = {0};
        struct config *cfg = config_load(FIXTURE_CONFIG_DIR "/invalid.yaml", &errs);
        assert_null(cfg);
        assert_int_equal(errs.cnt, 2);
        assert_error(&errs, FIXTURE_CONFIG_DIR "/invalid.yaml:7:29: kafka.enable.auto.offset.store:", NULL);
        assert_error(&errs, FIXTURE_CONFIG_DIR "/invalid.yaml:8:9: 'topics' is empty", NULL);
        config_errors_clear(&errs);

        cfg = config_load(FIXTURE_CONFIG_DIR "/no-such-file.yaml", &errs);
        assert_null(cfg);
        assert_int_equal(errs.cnt, 1);
        assert_prefix(errs.msgs[0], FIXTURE_CONFIG_DIR "/no-such-file.yaml:");
        assert_contains(errs.msgs[0], "cannot open: No such file or directory");
        config_errors_clear(&errs);
}

/* ---- refused configurations ------------------------------------------------ */

/* Building blocks; the comments give the line each one occupies in Y_HEAD Y_TOPICS. */
#define Y_PG "postgres:\n  conninfo: host=db\n"                        /* 2-3 */
#define Y_KAFKA "kafka:\n  bootstrap.servers: b:9092\n  group.id: g\n" /* 4-6 */
#define Y_HEAD "namespace: svc\n" Y_PG Y_KAFKA                         /* 1-6 */
#define Y_TOPIC_START "topics:\n  - name: t\n    key:\n"               /* 7-9 */
#define Y_SUBJECT "      subject: \"{json:id}\"\n"                     /* 10 */
#define Y_ACTION "      action: PAY\n"                                 /* 11 */
#define Y_HANDLER "    handler:\n      path: ./h.so\n"                 /* 12-13 */
#define Y_TOPICS Y_TOPIC_START Y_SUBJECT Y_ACTION Y_HANDLER            /* 7-13 */

struct err_case {
        const char *name;
        const char *yaml;
        size_t nerr;        /* exactly this many messages */
        const char *prefix; /* one message starts with "t.yaml:LINE:COL: message" */
        const char *phrase; /* ...and contains this (optional) */
        const char *also;   /* another message starting with this (optional) */
};

#define Y_RMQ_HEAD "namespace: svc\n" Y_PG "source: rabbitmq\nrabbitmq:\n  url: amqp://g:g@h:5672/v\n" /* 1-6 */

static const struct err_case err_cases[] = {
        {"error: source rabbitmq without a url",
         "namespace: svc\n" Y_PG "source: rabbitmq\nrabbitmq:\n  prefetch: 10\n" Y_TOPICS, 1,
         "t.yaml:5:1: missing required key 'rabbitmq.url' (source: rabbitmq)", NULL, NULL},
        {"error: source rabbitmq with a url that is not AMQP",
         "namespace: svc\n" Y_PG "source: rabbitmq\nrabbitmq:\n  url: http://h/\n" Y_TOPICS, 1,
         "t.yaml:5:1: rabbitmq.url: not an AMQP URL", NULL, NULL},
        {"error: a rabbitmq.management_url that is not http[s]",
         Y_RMQ_HEAD "  management_url: amqp://g:Pw9@h:15672\n" Y_TOPICS, 1,
         "t.yaml:5:1: rabbitmq.management_url: not an http[s]://user:password@host:port[/prefix] URL", NULL, NULL},
        {"error: a rabbitmq section under source kafka", Y_HEAD "rabbitmq:\n  url: amqp://h\n" Y_TOPICS, 1,
         "t.yaml:7:1: rabbitmq: is used only with source: rabbitmq (this config consumes Kafka)", NULL, NULL},
        {"error: a kafka section under source rabbitmq", Y_RMQ_HEAD Y_KAFKA Y_TOPICS, 1,
         "t.yaml:7:1: kafka: is used only with source: kafka (this config consumes RabbitMQ); remove it", NULL, NULL},
        {"error: an AMQP property in a Kafka topic's key",
         Y_HEAD Y_TOPIC_START "      subject: \"{amqp:message_id}\"\n" Y_ACTION Y_HANDLER, 1,
         "t.yaml:8:5: topic 't': {amqp:...} reads an AMQP property, which source: kafka does not have", NULL, NULL},
        {"error: an unknown AMQP property",
         Y_RMQ_HEAD Y_TOPIC_START "      subject: \"{amqp:priority}\"\n" Y_ACTION Y_HANDLER, 1,
         "t.yaml:10:16: 'topics[0].key.subject': unknown AMQP property '{amqp:priority}'", NULL, NULL},
        {"error: unknown top-level key", Y_HEAD "colour: blue\n" Y_TOPICS, 1, "t.yaml:7:1: unknown key 'colour'",
         "(expected one of: namespace, log_level, log_format, startup_timeout_ms, shutdown_timeout_ms, workers, "
         "source, postgres, kafka, rabbitmq, nats, topics, retention_classes, purge, outbox, http, limits, keys, "
         "absorption_check)",
         NULL},
        {"error: unknown key inside topics[0].key",
         Y_HEAD Y_TOPIC_START Y_SUBJECT Y_ACTION "      flavour: salty\n" Y_HANDLER, 1,
         "t.yaml:12:7: unknown key 'topics[0].key.flavour'",
         "(expected one of: subject, action, request, version, previous)", NULL},
        {"error: misspelt key is reported with the key it leaves missing",
         "namespace: svc\npostgres:\n  conn_info: host=db\n" Y_KAFKA Y_TOPICS, 2,
         "t.yaml:3:3: unknown key 'postgres.conn_info'", "conninfo",
         "t.yaml:3:3: missing required key 'postgres.conninfo'"},
        {"error: duplicate top-level key", Y_HEAD "namespace: other\n" Y_TOPICS, 1,
         "t.yaml:7:1: duplicate key 'namespace'", NULL, NULL},
        {"error: duplicate key inside a topic",
         Y_HEAD Y_TOPIC_START Y_SUBJECT Y_ACTION "      action: REFUND\n" Y_HANDLER, 1,
         "t.yaml:12:7: duplicate key 'topics[0].key.action'", NULL, NULL},
        {"error: missing namespace", "# namespace forgotten\n" Y_PG Y_KAFKA Y_TOPICS, 1,
         "t.yaml:2:1: missing required key 'namespace'", NULL, NULL},
        {"error: missing postgres.conninfo", "namespace: svc\npostgres:\n  retry_max_ms: 100\n" Y_KAFKA Y_TOPICS, 1,
         "t.yaml:3:3: missing required key 'postgres.conninfo'", NULL, NULL},
        {"error: missing postgres section", "namespace: svc\n" Y_KAFKA Y_TOPICS, 1,
         "t.yaml:1:1: missing required key 'postgres.conninfo'", NULL, NULL},
        {"error: missing kafka.group.id", "namespace: svc\n" Y_PG "kafka:\n  bootstrap.servers: b:9092\n" Y_TOPICS, 1,
         "t.yaml:5:3: missing required key 'kafka.group.id'", NULL, NULL},
        {"error: empty kafka.group.id",
         "namespace: svc\n" Y_PG "kafka:\n  bootstrap.servers: b:9092\n  group.id: \"\"\n" Y_TOPICS, 1,
         "t.yaml:6:13: 'kafka.group.id' is empty: a value is required", NULL, NULL},
        {"error: missing kafka.bootstrap.servers", "namespace: svc\n" Y_PG "kafka:\n  group.id: g\n" Y_TOPICS, 1,
         "t.yaml:5:3: missing required key 'kafka.bootstrap.servers'", NULL, NULL},
        {"error: missing kafka section", "namespace: svc\n" Y_PG Y_TOPICS, 1,
         "t.yaml:1:1: missing required key 'kafka'", NULL, NULL},
        {"error: source rabbitmq without its section", "namespace: svc\nsource: rabbitmq\n" Y_PG Y_TOPICS, 1,
         "t.yaml:1:1: missing required key 'rabbitmq.url' (source: rabbitmq)", NULL, NULL},
        {"error: a nats section with source kafka", Y_HEAD "nats: {stream: S}\n" Y_TOPICS, 1,
         "t.yaml:7:1: nats: is used only with source: nats", NULL, NULL},
        {"error: source nats without a stream", "namespace: svc\nsource: nats\n" Y_PG "nats:\n  durable: d\n" Y_TOPICS,
         1, "t.yaml:5:1: missing required key 'nats.stream'", NULL, NULL},
        {"error: source nats with a kafka section",
         "namespace: svc\nsource: nats\nnats: {stream: S}\n" Y_PG Y_KAFKA Y_TOPICS, 1,
         "t.yaml:6:1: kafka: is used only with source: kafka (this config consumes NATS JetStream); remove it", NULL,
         NULL},
        {"error: source nats, a batch larger than max_ack_pending",
         "namespace: svc\nsource: nats\nnats: {stream: S, max_ack_pending: 10}\n" Y_PG Y_TOPICS, 1,
         "t.yaml:7:5: topic 't': batch.max_messages 500 exceeds nats.max_ack_pending 10", NULL, NULL},
        {"error: source nats, a Kafka dead-letter topic",
         "namespace: svc\nsource: nats\nnats: {stream: S}\n" Y_PG Y_TOPICS "    dead_letter: {topic: x}\n", 1,
         "t.yaml:7:5: topic 't': dead_letter.topic is Kafka's", NULL, NULL},
        {"error: missing topics", Y_HEAD, 1, "t.yaml:1:1: missing required key 'topics'", NULL, NULL},
        {"error: empty topics list", Y_HEAD "topics: []\n", 1, "t.yaml:7:9: 'topics' is empty",
         "configure at least one topic", NULL},
        {"error: topics is a mapping, not a list", Y_HEAD "topics:\n  name: t\n", 1,
         "t.yaml:8:3: 'topics' must be a list, not a mapping", NULL, NULL},
        {"error: topic without key and handler", Y_HEAD "topics:\n  - name: t\n", 2,
         "t.yaml:8:5: missing required key 'topics[0].key.subject'", NULL,
         "t.yaml:8:5: missing required key 'topics[0].handler.path'"},
        {"error: mapping where a scalar is expected",
         "namespace: svc\npostgres:\n  conninfo:\n    host: db\n" Y_KAFKA Y_TOPICS, 1,
         "t.yaml:4:5: 'postgres.conninfo' must be a scalar, not a mapping", NULL, NULL},
        {"error: list where a scalar is expected", "namespace: [a, b]\n" Y_PG Y_KAFKA Y_TOPICS, 1,
         "t.yaml:1:12: 'namespace' must be a scalar, not a list", NULL, NULL},
        {"error: scalar where a mapping is expected", Y_HEAD "topics:\n  - name: t\n    key: \"{json:id}\"\n" Y_HANDLER,
         1, "t.yaml:9:10: 'topics[0].key", "must be a mapping, not a scalar", NULL},
        {"error: kafka is not a mapping", "namespace: svc\n" Y_PG "kafka: b:9092\n" Y_TOPICS, 1,
         "t.yaml:4:8: 'kafka' must be a mapping of names to values, not a scalar", NULL, NULL},
        {"error: top level is a list", "- namespace: svc\n", 1, "t.yaml:1:1: 'top level' must be a mapping, not a list",
         NULL, NULL},
        {"error: integer below range", Y_HEAD Y_TOPICS "    batch:\n      max_messages: 0\n", 1,
         "t.yaml:15:21: 'topics[0].batch.max_messages': 0 is out of range [1, 100000]", NULL, NULL},
        {"error: integer above range", Y_HEAD Y_TOPICS "    retry:\n      max_attempts: 1001\n", 1,
         "t.yaml:15:21: 'topics[0].retry.max_attempts': 1001 is out of range [1, 1000]", NULL, NULL},
        {"error: negative integer", Y_HEAD Y_TOPICS "    max_payload_bytes: -1\n", 1,
         "t.yaml:14:24: 'topics[0].max_payload_bytes': -1 is out of range [1, 1000000000]", NULL, NULL},
        {"error: limits.json_depth below range", Y_HEAD "limits:\n  json_depth: 0\n" Y_TOPICS, 1,
         "t.yaml:8:15: 'limits.json_depth': 0 is out of range [1, 2048]", NULL, NULL},
        {"error: limits.key_bytes above range", Y_HEAD "limits:\n  key_bytes: 2000000\n" Y_TOPICS, 1,
         "t.yaml:8:14: 'limits.key_bytes': 2000000 is out of range [16, 1048576]", NULL, NULL},
        {"error: limits.batch_bytes below range", Y_HEAD "limits:\n  batch_bytes: 10\n" Y_TOPICS, 1,
         "t.yaml:8:16: 'limits.batch_bytes': 10 is out of range [1024, 2147483647]", NULL, NULL},
        {"error: limits.payload_bytes not an integer", Y_HEAD "limits:\n  payload_bytes: 1MB\n" Y_TOPICS, 1,
         "t.yaml:8:18: 'limits.payload_bytes': '1MB' is not an integer", NULL, NULL},
        {"error: limits.headers negative", Y_HEAD "limits:\n  headers: -1\n" Y_TOPICS, 1,
         "t.yaml:8:12: 'limits.headers': -1 is out of range [0, 100000]", NULL, NULL},
        {"error: unknown key under limits", Y_HEAD "limits:\n  max_depth: 5\n" Y_TOPICS, 1,
         "t.yaml:8:3: unknown key 'limits.max_depth'", NULL, NULL},
        {"error: not an integer", Y_HEAD Y_TOPICS "    batch:\n      max_wait_ms: 10ms\n", 1,
         "t.yaml:15:20: 'topics[0].batch.max_wait_ms': '10ms' is not an integer", NULL, NULL},
        {"error: integer too large for any int", Y_HEAD "shutdown_timeout_ms: 99999999999999999999\n" Y_TOPICS, 1,
         "t.yaml:7:22: 'shutdown_timeout_ms': '99999999999999999999' is not an integer", NULL, NULL},
        {"error: empty integer", Y_HEAD "shutdown_timeout_ms: \"\"\n" Y_TOPICS, 1,
         "t.yaml:7:22: 'shutdown_timeout_ms': '' is not an integer", NULL, NULL},
        {"error: key template {offset} is refused",
         Y_HEAD Y_TOPIC_START "      subject: \"{offset}\"\n" Y_ACTION Y_HANDLER, 1,
         "t.yaml:10:16: 'topics[0].key.subject': {offset} is refused", "deduplicates nothing", NULL},
        {"error: key template {partition} in request is refused",
         Y_HEAD Y_TOPIC_START Y_SUBJECT Y_ACTION "      request: \"{json:id}-{partition}\"\n" Y_HANDLER, 1,
         "t.yaml:12:16: 'topics[0].key.request': {partition} is refused", "deduplicates nothing", NULL},
        {"error: key template unknown source", Y_HEAD Y_TOPIC_START Y_SUBJECT "      action: \"{foo}\"\n" Y_HANDLER, 1,
         "t.yaml:11:15: 'topics[0].key.action': unknown key source '{foo}'",
         "expected {json:PATH}, {header:NAME} or {key}", NULL},
        {"error: key template unterminated brace",
         Y_HEAD Y_TOPIC_START "      subject: \"{json:id\"\n" Y_ACTION Y_HANDLER, 1,
         "t.yaml:10:16: 'topics[0].key.subject': unterminated '{'", NULL, NULL},
        {"error: key template bad JSON path",
         Y_HEAD Y_TOPIC_START "      subject: \"{json:a..b}\"\n" Y_ACTION Y_HANDLER, 1,
         "t.yaml:10:16: 'topics[0].key.subject': JSON path 'a..b': empty member name", NULL, NULL},
        {"error: empty key action", Y_HEAD Y_TOPIC_START Y_SUBJECT "      action: \"\"\n" Y_HANDLER, 1,
         "t.yaml:11:15: 'topics[0].key.action' is empty: give a value, or remove the key", NULL, NULL},
        {"error: unset ${VAR}", "namespace: svc\npostgres:\n  conninfo: \"${DEDUPD_TEST_UNSET}\"\n" Y_KAFKA Y_TOPICS, 1,
         "t.yaml:3:13: 'postgres.conninfo': environment variable DEDUPD_TEST_UNSET is not set",
         "use ${DEDUPD_TEST_UNSET:-default}", NULL},
        {"error: unset ${VAR} in the handler config",
         Y_HEAD Y_TOPICS "      config:\n        token: \"${DEDUPD_TEST_UNSET}\"\n", 1,
         "t.yaml:15:16: 'topics[0].handler.config': environment variable DEDUPD_TEST_UNSET is not set", NULL, NULL},
        {"error: unset ${VAR} in a kafka property", Y_HEAD "  sasl.password: \"${DEDUPD_TEST_UNSET}\"\n" Y_TOPICS, 1,
         "t.yaml:7:18: 'kafka.sasl.password': environment variable DEDUPD_TEST_UNSET is not set", NULL, NULL},
        {"error: unset ${VAR} in kafka.bootstrap.servers (not also 'missing')",
         "namespace: svc\n" Y_PG "kafka:\n  bootstrap.servers: \"${DEDUPD_TEST_UNSET}\"\n  group.id: g\n" Y_TOPICS, 1,
         "t.yaml:5:22: 'kafka.bootstrap.servers': environment variable DEDUPD_TEST_UNSET is not set", NULL, NULL},
        {"error: unterminated ${", "namespace: svc\npostgres:\n  conninfo: \"${PG_DSN\"\n" Y_KAFKA Y_TOPICS, 1,
         "t.yaml:3:13: 'postgres.conninfo': unterminated ${ in value", NULL, NULL},
        {"error: enable.auto.offset.store is refused", Y_HEAD "  enable.auto.offset.store: \"false\"\n" Y_TOPICS, 1,
         "t.yaml:7:29: kafka.enable.auto.offset.store: dedupd stores offsets itself", "only after the database COMMIT",
         NULL},
        {"error: cooperative-sticky is refused",
         Y_HEAD "  partition.assignment.strategy: cooperative-sticky\n" Y_TOPICS, 1,
         "t.yaml:7:34: kafka.partition.assignment.strategy: cooperative-sticky has known bugs",
         "use range or roundrobin", NULL},
        {"error: YAML syntax, mapping value in a scalar",
         "namespace: svc\npostgres:\n  conninfo: host=db\n    retry_max_ms: 5\n" Y_KAFKA Y_TOPICS, 1,
         "t.yaml:4:17: YAML syntax: mapping values are not allowed", NULL, NULL},
        {"error: YAML syntax, tab indentation", "namespace: svc\npostgres:\n\tconninfo: host=db\n" Y_KAFKA Y_TOPICS, 1,
         "t.yaml:3:1: YAML syntax:", "cannot start any token", NULL},
        {"error: topic configured twice",
         Y_HEAD Y_TOPICS "  - name: t\n    key:\n      subject: \"{key}\"\n"
                         "    handler:\n      path: ./h2.so\n",
         1, "t.yaml:14:5: topic 't' is configured twice", NULL, NULL},
        {"error: dead-letter topic is the topic itself", Y_HEAD Y_TOPICS "    dead_letter:\n      topic: t\n", 1,
         "t.yaml:8:5: topic 't': the dead-letter topic cannot be the topic itself", NULL, NULL},
        /* retention classes: the seed's inequality, with the numbers */
        {"error: retention keep not longer than retry + skew + replay",
         Y_HEAD Y_TOPICS "    retention: pay\n"
                         "retention_classes:\n  pay:\n    keep: 2d\n    max_retry: 30s\n    clock_skew: 5m\n"
                         "    replay_window: 48h\n",
         1,
         "t.yaml:16:3: retention class 'pay': keep 2d must exceed max_retry + clock_skew + replay_window = 30s + 5m + "
         "2d = 2d 5m 30s",
         "short by 5m 30s", NULL},
        {"error: retention class not defined", Y_HEAD Y_TOPICS "    retention: gold\n", 1,
         "t.yaml:8:5: topic 't': retention class 'gold' is not defined", NULL, NULL},
        {"error: retention keep is required", Y_HEAD Y_TOPICS "retention_classes:\n  pay:\n    max_retry: 30s\n", 1,
         "t.yaml:16:5: missing required key 'retention_classes.pay.keep'", NULL, NULL},
        {"error: bad duration", Y_HEAD Y_TOPICS "retention_classes:\n  pay:\n    keep: 3 fortnights\n", 1,
         "t.yaml:16:11: 'retention_classes.pay.keep': '3 fortnights' is not a duration", NULL, NULL},
        {"error: response_ttl longer than keep",
         Y_HEAD Y_TOPICS "retention_classes:\n  pay:\n    keep: 1h\n    response_ttl: 2h\n", 1,
         "t.yaml:15:3: retention class 'pay': response_ttl 2h is longer than keep 1h", NULL, NULL},
        {"error: unknown mode", Y_HEAD Y_TOPICS "    mode: eventually\n", 1,
         "t.yaml:14:11: 'topics[0].mode': 'eventually' is not one of transactional, external", NULL, NULL},
        {"error: unknown on_expired policy", Y_HEAD Y_TOPICS "    external:\n      on_expired: retry\n", 1,
         "t.yaml:15:19: 'topics[0].external.on_expired': 'retry' is not one of dead-letter, skip, reexecute", NULL,
         NULL},
        {"error: unknown on_mismatch policy", Y_HEAD Y_TOPICS "    fingerprint:\n      on_mismatch: ignore\n", 1,
         "t.yaml:15:20: 'topics[0].fingerprint.on_mismatch': 'ignore' is not one of absorb, dead-letter", NULL, NULL},
        {"error: fingerprint fields not a list of paths",
         Y_HEAD Y_TOPICS "    fingerprint:\n      fields: [\"a..b\"]\n", 1,
         "t.yaml:8:5: topic 't': fingerprint.fields[0]:", "empty member name", NULL},
        {"error: unknown log level", "namespace: svc\nlog_level: loud\n" Y_PG Y_KAFKA Y_TOPICS, 1,
         "t.yaml:2:12: 'log_level': 'loud' is not one of error, warn, info, debug", NULL, NULL},
        {"error: unknown log format", "namespace: svc\nlog_format: logfmt\n" Y_PG Y_KAFKA Y_TOPICS, 1,
         "t.yaml:2:13: 'log_format': 'logfmt' is not one of human, json", NULL, NULL},
        {"error: negative startup timeout", "namespace: svc\nstartup_timeout_ms: -1\n" Y_PG Y_KAFKA Y_TOPICS, 1,
         "t.yaml:2:21: 'startup_timeout_ms': -1 is out of range [0, 3600000]", NULL, NULL},
        {"error: recursive alias in handler config", Y_HEAD Y_TOPICS "      config: &a [*a]\n", 1,
         "t.yaml:14:", "recursive", NULL},
        /* Configs with holes: a key written with nothing (or null) after it, or "" where a value is
         * required, refused where it is — whatever the row's type — never passed on as a value. */
        {"hole: topic name with nothing after it", Y_HEAD "topics:\n  - name:\n    key:\n" Y_SUBJECT Y_ACTION Y_HANDLER,
         1, "t.yaml:8:10: 'topics[0].name' is required but has no value", NULL, NULL},
        {"hole: topic name ~", Y_HEAD "topics:\n  - name: ~\n    key:\n" Y_SUBJECT Y_ACTION Y_HANDLER, 1,
         "t.yaml:8:11: 'topics[0].name' is required but has no value", NULL, NULL},
        {"hole: topic name null", Y_HEAD "topics:\n  - name: null\n    key:\n" Y_SUBJECT Y_ACTION Y_HANDLER, 1,
         "t.yaml:8:11: 'topics[0].name' is required but has no value", NULL, NULL},
        {"hole: topic name tagged !!null",
         Y_HEAD "topics:\n  - name: !!null \"\"\n    key:\n" Y_SUBJECT Y_ACTION Y_HANDLER, 1,
         "t.yaml:8:11: 'topics[0].name' is required but has no value", NULL, NULL},
        {"hole: topic name \"\"", Y_HEAD "topics:\n  - name: \"\"\n    key:\n" Y_SUBJECT Y_ACTION Y_HANDLER, 1,
         "t.yaml:8:11: 'topics[0].name' is empty: a value is required", NULL, NULL},
        {"hole: topic name from a ${VAR} that is empty",
         Y_HEAD "topics:\n  - name: \"${DEDUPD_TEST_EMPTY}\"\n    key:\n" Y_SUBJECT Y_ACTION Y_HANDLER, 1,
         "t.yaml:8:11: 'topics[0].name' is empty (after ${...} substitution): a value is required", NULL, NULL},
        {"hole: key subject with nothing after it", Y_HEAD "topics:\n  - name: t\n    key: {subject: }\n" Y_HANDLER, 1,
         "t.yaml:9:20: 'topics[0].key.subject' is required but has no value", NULL, NULL},
        {"hole: key section with nothing under it", Y_HEAD "topics:\n  - name: t\n    key:\n" Y_HANDLER, 1,
         "t.yaml:9:9: 'topics[0].key' is required but has no value", NULL, NULL},
        {"hole: handler path ~", Y_HEAD Y_TOPIC_START Y_SUBJECT Y_ACTION "    handler: {path: ~}\n", 1,
         "t.yaml:12:21: 'topics[0].handler.path' is required but has no value", NULL, NULL},
        {"hole: postgres conninfo \"\"", "namespace: svc\npostgres: {conninfo: \"\"}\n" Y_KAFKA Y_TOPICS, 1,
         "t.yaml:2:22: 'postgres.conninfo' is empty: a value is required", NULL, NULL},
        {"hole: postgres section null", "namespace: svc\npostgres: null\n" Y_KAFKA Y_TOPICS, 1,
         "t.yaml:2:11: 'postgres' is required but has no value", NULL, NULL},
        {"hole: namespace with nothing after it", "namespace:\n" Y_PG Y_KAFKA Y_TOPICS, 1,
         "t.yaml:1:11: 'namespace' is required but has no value", NULL, NULL},
        {"hole: topics with nothing after it", Y_HEAD "topics:\n", 1,
         "t.yaml:7:8: 'topics' is required but has no value", NULL, NULL},
        {"hole: a topic list item with nothing in it",
         Y_HEAD "topics:\n  -\n  - name: u\n    key: {subject: \"{key}\"}\n    handler: {path: h.so}\n", 1,
         "t.yaml:8:4: 'topics[0]' has no value", "its settings go under it, as a mapping", NULL},
        {"hole: kafka with nothing after it", "namespace: svc\n" Y_PG "kafka:\n" Y_TOPICS, 1,
         "t.yaml:4:7: 'kafka' has no value", NULL, NULL},
        {"hole: kafka bootstrap.servers with nothing after it (not also 'missing')",
         "namespace: svc\n" Y_PG "kafka:\n  bootstrap.servers:\n  group.id: g\n" Y_TOPICS, 1,
         "t.yaml:5:21: 'kafka.bootstrap.servers' is required but has no value", NULL, NULL},
        {"hole: another kafka property with nothing after it", Y_HEAD "  client.id:\n" Y_TOPICS, 1,
         "t.yaml:7:13: 'kafka.client.id' has no value", "\"\" (quoted) is the empty value", NULL},
        {"hole: kafka group.id from a ${VAR} that is empty",
         "namespace: svc\n" Y_PG "kafka:\n  bootstrap.servers: b:9092\n  group.id: \"${DEDUPD_TEST_EMPTY}\"\n" Y_TOPICS,
         1, "t.yaml:6:13: 'kafka.group.id' is empty: a value is required", NULL, NULL},
        {"hole: an optional section null", Y_HEAD Y_TOPICS "    batch: ~\n", 1,
         "t.yaml:14:12: 'topics[0].batch' has no value", NULL, NULL},
        {"hole: an integer with nothing after it", Y_HEAD Y_TOPICS "    batch:\n      max_messages:\n", 1,
         "t.yaml:15:20: 'topics[0].batch.max_messages' has no value", "remove the key for the default (500)", NULL},
        {"hole: a boolean null",
         Y_HEAD Y_TOPIC_START Y_SUBJECT Y_ACTION "    handler: {path: h.so, per_message: null}\n", 1,
         "t.yaml:12:40: 'topics[0].handler.per_message' has no value", NULL, NULL},
        {"hole: an enum ~", "namespace: svc\nlog_level: ~\n" Y_PG Y_KAFKA Y_TOPICS, 1,
         "t.yaml:2:12: 'log_level' has no value", "the default (info)", NULL},
        {"hole: the handler's config null",
         Y_HEAD Y_TOPIC_START Y_SUBJECT Y_ACTION "    handler: {path: h.so, config: }\n", 1,
         "t.yaml:12:35: 'topics[0].handler.config' has no value", NULL, NULL},
        {"hole: fingerprint fields null", Y_HEAD Y_TOPICS "    fingerprint: {fields: null}\n", 1,
         "t.yaml:14:27: 'topics[0].fingerprint.fields' has no value", NULL, NULL},
        {"hole: retention with nothing after it", Y_HEAD Y_TOPICS "    retention:\n", 1,
         "t.yaml:14:15: 'topics[0].retention' has no value", NULL, NULL},
        {"hole: retention \"\"", Y_HEAD Y_TOPICS "    retention: \"\"\n", 1,
         "t.yaml:14:16: 'topics[0].retention' is empty: give a value, or remove the key", NULL, NULL},
        {"hole: dead_letter topic \"\"", Y_HEAD Y_TOPICS "    dead_letter: {topic: \"\"}\n", 1,
         "t.yaml:14:26: 'topics[0].dead_letter.topic' is empty", NULL, NULL},
        {"hole: reply header null (\"\" disables replies; null says nothing)",
         Y_HEAD Y_TOPICS "    reply: {header: }\n", 1, "t.yaml:14:21: 'topics[0].reply.header' has no value",
         "\"\" (quoted) is the empty value", NULL},
        {"hole: reply correlation_header \"\"", Y_HEAD Y_TOPICS "    reply: {correlation_header: \"\"}\n", 1,
         "t.yaml:14:33: 'topics[0].reply.correlation_header' is empty", "the default (correlation-id)", NULL},
        {"hole: a retention class with nothing under it", Y_HEAD Y_TOPICS "retention_classes:\n  gold:\n", 1,
         "t.yaml:15:8: 'retention_classes.gold' has no value", NULL, NULL},
        {"hole: a retention class keep with nothing after it", Y_HEAD Y_TOPICS "retention_classes:\n  gold: {keep: }\n",
         1, "t.yaml:15:16: 'retention_classes.gold.keep' is required but has no value", NULL, NULL},
        {"hole: retention_classes null", Y_HEAD Y_TOPICS "retention_classes: ~\n", 1,
         "t.yaml:14:20: 'retention_classes' has no value", NULL, NULL},
        {"hole: nats stream with nothing after it (not also 'missing')",
         "namespace: svc\nsource: nats\nnats: {stream: }\n" Y_PG Y_TOPICS, 1, "t.yaml:3:16: 'nats.stream' has no value",
         NULL, NULL},
        {"hole: nats url \"\"", "namespace: svc\nsource: nats\nnats: {stream: S, url: \"\"}\n" Y_PG Y_TOPICS, 1,
         "t.yaml:3:24: 'nats.url' is empty", "the default (nats://127.0.0.1:4222)", NULL},
        {"hole: rabbitmq url with nothing after it (not also 'missing')",
         "namespace: svc\n" Y_PG "source: rabbitmq\nrabbitmq:\n  url:\n" Y_TOPICS, 1,
         "t.yaml:6:7: 'rabbitmq.url' has no value", NULL, NULL},
        {"hole: http listen null", Y_HEAD "http: {listen: null}\n" Y_TOPICS, 1,
         "t.yaml:7:16: 'http.listen' has no value", NULL, NULL},
        {"error: http.listen not host:port, refused at check rather than at start",
         Y_HEAD "http: {listen: \"9400\"}\n" Y_TOPICS, 1, "t.yaml:7:16: 'http.listen': '9400' is not host:port", NULL,
         NULL},
        {"error: http.max_connections_per_ip 0",
         Y_HEAD "http: {listen: \"127.0.0.1:0\", max_connections_per_ip: 0}\n" Y_TOPICS, 1,
         "t.yaml:7:55: 'http.max_connections_per_ip': 0 is out of range [1, 10000]", NULL, NULL},
        {"hole: a second document after the config", Y_HEAD Y_TOPICS "---\nnamespace: other\n", 1,
         "t.yaml:14:1: a second YAML document starts here", NULL, NULL},
        {"hole: a kafka property given twice", Y_HEAD "  group.id: h\n" Y_TOPICS, 1,
         "t.yaml:7:3: duplicate key 'kafka.group.id'", NULL, NULL},
        {"error: bucket_from under keys.layout: heap", Y_HEAD Y_TOPICS "    bucket_from: \"{json:d}\"\n", 1,
         "t.yaml:8:5: topic 't': bucket_from is for keys.layout: partitioned", NULL, NULL},
        {"error: keys.layout: partitioned without a retention class", Y_HEAD Y_TOPICS "keys: {layout: partitioned}\n",
         1, "t.yaml:8:5: topic 't': keys.layout: partitioned needs a retention class", NULL, NULL},
        {"error: keys.bucket not whole days", Y_HEAD Y_TOPICS "keys: {layout: heap, bucket: 36h}\n", 1,
         "t.yaml:14:30: 'keys.bucket': must be a whole number of 1d, not '36h'", NULL, NULL},
        {"error: bucket_from is no template",
         Y_HEAD Y_TOPICS "    bucket_from: \"{json:\"\n    retention: r\nkeys: {layout: partitioned}\n"
                         "retention_classes:\n  r: {keep: 2d, allow_shorter_than_topic: true}\n",
         1, "t.yaml:14:18: 'topics[0].bucket_from': unterminated '{' in key template", NULL, NULL},
        {"error: empty file", "", 1, "t.yaml:1:1: the file is empty", NULL, NULL},
        {"error: file with only comments", "# nothing here yet\n", 1, "t.yaml:1:1: the file is empty", NULL, NULL},
};

static void err_case(void **state)
{
        const struct err_case *c = *state;
        struct config_errors errs = {0};

        load_bad(c->yaml, &errs);
        assert_error(&errs, c->prefix, c->phrase);
        if (c->also)
                assert_error(&errs, c->also, NULL);
        if (errs.cnt != c->nerr) {
                print_errors(&errs);
                fail_msg("expected %zu error(s), got %zu", c->nerr, errs.cnt);
        }
        config_errors_clear(&errs);
}

/* librdkafka's own wording reaches the operator unchanged, at the value's position. */
static void kafka_errors_verbatim(void **state)
{
        static const struct {
                const char *line, *name, *value, *where;
        } props[] = {
                {"  session.timeout.ms: abc\n", "session.timeout.ms", "abc", "t.yaml:7:23: "},
                {"  no.such.property: 1\n", "no.such.property", "1", "t.yaml:7:21: "},
                {"  auto.offset.reset: sideways\n", "auto.offset.reset", "sideways", "t.yaml:7:22: "},
        };
        for (size_t i = 0; i < sizeof(props) / sizeof(props[0]); i++) {
                char yaml[1024], errstr[512], want[1024];
                struct config_errors errs = {0};
                rd_kafka_conf_t *conf = rd_kafka_conf_new();

                assert_int_not_equal(rd_kafka_conf_set(conf, props[i].name, props[i].value, errstr, sizeof(errstr)),
                                     RD_KAFKA_CONF_OK);
                rd_kafka_conf_destroy(conf);
                snprintf(want, sizeof(want), "%skafka.%s: %s", props[i].where, props[i].name, errstr);
                snprintf(yaml, sizeof(yaml), "%s%s%s", Y_HEAD, props[i].line, Y_TOPICS);

                load_bad(yaml, &errs);
                if (errs.cnt != 1) {
                        print_errors(&errs);
                        fail_msg("expected 1 error, got %zu", errs.cnt);
                }
                assert_string_equal(errs.msgs[0], want);
                config_errors_clear(&errs);
        }
}

static void several_errors_at_once(void **state)
{
        struct config_errors errs = {0};

        load_bad("namespace: svc\n"                    /*  1 */
                 "colour: blue\n"                      /*  2 */
                 "postgres:\n"                         /*  3 */
                 "  conninfo: host=db\n"               /*  4 */
                 "kafka:\n"                            /*  5 */
                 "  bootstrap.servers: b:9092\n"       /*  6 */
                 "  enable.auto.offset.store: false\n" /*  7 */
                 "topics:\n"                           /*  8 */
                 "  - name: t\n"                       /*  9 */
                 "    key:\n"                          /* 10 */
                 "      subject: \"{offset}\"\n"       /* 11 */
                 "    handler:\n"                      /* 12 */
                 "      path: ./h.so\n"                /* 13 */
                 "    batch:\n"                        /* 14 */
                 "      max_messages: 0\n"             /* 15 */
                 "  - name: u\n"                       /* 16 */
                 "    key:\n"                          /* 17 */
                 "      subject: \"{key}\"\n"          /* 18 */
                 "    handler: {}\n",                  /* 19 */
                 &errs);
        /* all of them, in file order, whichever check found them */
        static const char *const want[] = {
                "t.yaml:2:1: unknown key 'colour'",
                "t.yaml:6:3: missing required key 'kafka.group.id'",
                "t.yaml:7:29: kafka.enable.auto.offset.store:",
                "t.yaml:11:16: 'topics[0].key.subject': {offset} is refused",
                "t.yaml:15:21: 'topics[0].batch.max_messages': 0 is out of range",
                "t.yaml:19:14: missing required key 'topics[1].handler.path'",
        };
        if (errs.cnt != sizeof(want) / sizeof(want[0])) {
                print_errors(&errs);
                fail_msg("expected %zu errors, got %zu", sizeof(want) / sizeof(want[0]), errs.cnt);
        }
        for (size_t i = 0; i < errs.cnt; i++)
                assert_prefix(errs.msgs[i], want[i]);
        config_errors_clear(&errs);
}

/* What only looks like a hole: a quoted "null" is a string, and "" loads where the row gives it a
 * meaning (no replies, no endpoints, no dead-letter exchange) or the value is librdkafka's. */
static void quoted_values_are_not_holes(void **state)
{
        (void)state;
        struct config *cfg = load_ok("namespace: \"null\"\n"
                                     "postgres: {conninfo: \"dbname=x\"}\n"
                                     "kafka: {bootstrap.servers: \"b:9092\", group.id: '~', client.id: \"\"}\n"
                                     "http: {listen: \"\"}\n"
                                     "topics:\n"
                                     "  - {name: t, key: {subject: \"{key}\"}, handler: {path: h.so},"
                                     " reply: {header: \"\"}}\n");
        assert_string_equal(cfg->namespace, "null");
        assert_string_equal(kafka_props(cfg)->v[1].value, "~");
        assert_string_equal(kafka_props(cfg)->v[2].value, "");
        assert_string_equal(cfg->http_listen, "");
        assert_string_equal(cfg->topics[0].reply_header, "");
        config_free(cfg);
}

/* SIGHUP reads the file through the same rows: a hole refuses the whole reload, and the running
 * configuration keeps every value (the log level beside the hole is not applied either). */
static void reload_refuses_a_config_with_holes(void **state)
{
        (void)state;
        char path[] = "/tmp/test_config_reload.XXXXXX", applied[512], restart[512];
        struct config_errors errs = {0};
        struct config *live = load_ok(Y_HEAD Y_TOPICS);
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        FILE *fp = fdopen(fd, "w");
        fputs("log_level: debug\n" Y_HEAD "topics:\n  - name:\n    key:\n" Y_SUBJECT Y_ACTION Y_HANDLER, fp);
        fclose(fp);
        assert_int_equal(config_reload(live, path, &errs, applied, sizeof(applied), restart, sizeof(restart)), -1);
        char want[128];
        snprintf(want, sizeof(want), "%s:9:10: 'topics[0].name' is required but has no value", path);
        assert_error(&errs, want, NULL);
        assert_int_equal(live->log_level, LOG_INFO);
        assert_string_equal(live->topics[0].name, "t");
        config_errors_clear(&errs);
        config_free(live);
        unlink(path);
}

/* workers: 1 by default; more only where one connection per thread is
 * possible — not with RabbitMQ (one connection consumes and publishes), not
 * with an external-mode topic — each refused with its line and why. */
static void workers_where_they_can_run(void **state)
{
        (void)state;
        struct config_errors errs = {0};
        struct config *cfg = load_ok(Y_HEAD Y_TOPICS);
        assert_int_equal(cfg->workers, 1);
        config_free(cfg);
        cfg = load_ok("workers: 4\n" Y_HEAD Y_TOPICS);
        assert_int_equal(cfg->workers, 4);
        config_free(cfg);
        load_bad("workers: 0\n" Y_HEAD Y_TOPICS, &errs);
        assert_error(&errs, "t.yaml:1:", "workers");
        config_errors_clear(&errs);
        load_bad("workers: 2\n" Y_HEAD Y_TOPICS "    mode: external\n", &errs);
        assert_error(&errs, "t.yaml:", "external mode runs on one connection: workers must be 1 (it is 2)");
        config_errors_clear(&errs);
        load_bad("namespace: svc\nworkers: 2\npostgres: {conninfo: \"dbname=x\"}\nsource: rabbitmq\n"
                 "rabbitmq: {url: \"amqp://u:p@h:5672/v\"}\n"
                 "topics:\n  - {name: q, key: {subject: \"{amqp:message_id}\"}, handler: {path: h.so}}\n",
                 &errs);
        assert_error(&errs, "t.yaml:", "RabbitMQ consumes and publishes on one connection");
        config_errors_clear(&errs);
}

static void retention_and_modes_load(void **state)
{
        struct config_errors errs = {0};
        struct config *cfg = config_load_string(
                "t.yaml",
                Y_HEAD Y_TOPICS "    retention: pay\n    mode: external\n"
                                "    external: {lease_ms: 5s, on_expired: skip}\n"
                                "    fingerprint: {fields: [user_id, amount], on_mismatch: dead-letter}\n"
                                "retention_classes:\n  pay:\n    keep: 7d\n    max_retry: 30s\n    clock_skew: 5m\n"
                                "    replay_window: 48h\n    response_ttl: 24h\n    allow_shorter_than_topic: true\n",
                &errs);
        if (!cfg)
                print_errors(&errs);
        assert_non_null(cfg);
        const struct topic_conf *t = &cfg->topics[0];
        assert_non_null(t->retention);
        assert_string_equal(t->retention->name, "pay");
        assert_true(t->retention->keep_ms == 7LL * 86400000);
        assert_true(t->retention->replay_window_ms == 48LL * 3600000);
        assert_true(t->retention->response_ttl_ms == 24LL * 3600000);
        assert_int_equal(t->retention->allow_shorter_than_topic, 1);
        assert_int_equal(t->mode, MODE_EXTERNAL);
        assert_true(t->lease_ms == 5000);
        assert_true(t->expire_grace_ms == 600000); /* default 10m */
        assert_int_equal(t->on_expired, EXPIRED_SKIP);
        assert_int_equal(t->on_mismatch, MISMATCH_DEAD_LETTER);
        assert_int_equal((int)json_array_size(t->fingerprint_fields), 2);
        assert_string_equal(t->reply_header, "reply-to");
        assert_string_equal(t->correlation_header, "correlation-id");
        assert_int_equal(cfg->purge_interval_ms, 60000);
        assert_int_equal(cfg->outbox_batch, 500);
        config_free(cfg);
        config_errors_clear(&errs);
}

static void durations(void **state)
{
        char buf[64];
        assert_true(config_parse_duration("250ms") == 250);
        assert_true(config_parse_duration("30s") == 30000);
        assert_true(config_parse_duration("5m") == 300000);
        assert_true(config_parse_duration("48h") == 172800000);
        assert_true(config_parse_duration("7d") == 604800000);
        assert_true(config_parse_duration("1500") == 1500);
        assert_true(config_parse_duration("-1s") == -1);
        assert_true(config_parse_duration("1y") == -1);
        assert_true(config_parse_duration("") == -1);
        assert_string_equal(config_format_duration(172800000 + 330000, buf, sizeof(buf)), "2d 5m 30s");
        assert_string_equal(config_format_duration(0, buf, sizeof(buf)), "0s");
        assert_string_equal(config_format_duration(1250, buf, sizeof(buf)), "1s 250ms");
}

/* A load appends to errs; only its own problems make it fail. */
static void errors_accumulate(void **state)
{
        struct config_errors errs = {0};
        struct config *cfg;

        config_errors_add(&errs, "other.yaml", 3, 4, "earlier problem %d", 42);
        assert_int_equal(errs.cnt, 1);
        assert_string_equal(errs.msgs[0], "other.yaml:3:4: earlier problem 42");

        cfg = config_load_string("t.yaml", Y_HEAD Y_TOPICS, &errs);
        assert_non_null(cfg);
        assert_int_equal(errs.cnt, 1);
        config_free(cfg);

        cfg = config_load_string("t.yaml", Y_HEAD, &errs);
        assert_null(cfg);
        assert_int_equal(errs.cnt, 2);
        assert_string_equal(errs.msgs[1], "t.yaml:1:1: missing required key 'topics'");

        config_errors_clear(&errs);
        assert_int_equal(errs.cnt, 0);
        assert_null(errs.msgs);
        config_errors_clear(&errs); /* twice is fine */
        config_free(NULL);
}

static void reference_lists_every_key(void **state)
{
        char *text = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&text, &len);

        assert_non_null(fp);
        config_print_reference(fp);
        fclose(fp);
        assert_contains(text, "namespace");
        assert_contains(text, "postgres.conninfo");
        assert_contains(text, "topics[].key.subject");
        assert_contains(text, "topics[].batch.max_messages");
        assert_contains(text, "topics[].dead_letter.topic");
        assert_contains(text, "topics[].dead_letter.create");
        assert_contains(text, "1000000");
        free(text);
}

/* ---- config_interpolate ------------------------------------------------------ */

struct interp_case {
        const char *name;
        const char *in;
        const char *want; /* NULL: refused */
        const char *err;  /* phrase of the refusal */
};

static const struct interp_case interp_cases[] = {
        {"interpolate: plain text", "host=db port=5432", "host=db port=5432", NULL},
        {"interpolate: empty string", "", "", NULL},
        {"interpolate: set variable", "${DEDUPD_TEST_HOST}", "db.internal", NULL},
        {"interpolate: twice, with text around", "a-${DEDUPD_TEST_HOST}-b-${DEDUPD_TEST_HOST}-c",
         "a-db.internal-b-db.internal-c", NULL},
        {"interpolate: unset with default", "${DEDUPD_TEST_UNSET:-fallback}", "fallback", NULL},
        {"interpolate: set ignores default", "${DEDUPD_TEST_HOST:-fallback}", "db.internal", NULL},
        {"interpolate: set but empty takes default", "${DEDUPD_TEST_EMPTY:-fallback}", "fallback", NULL},
        {"interpolate: set but empty, no default", "x${DEDUPD_TEST_EMPTY}y", "xy", NULL},
        {"interpolate: empty default", "x${DEDUPD_TEST_UNSET:-}y", "xy", NULL},
        {"interpolate: default containing :-", "${DEDUPD_TEST_UNSET:-a:-b}", "a:-b", NULL},
        {"interpolate: $NAME without braces is literal", "$DEDUPD_TEST_HOST", "$DEDUPD_TEST_HOST", NULL},
        {"interpolate: dollars are literal", "pa$$w0rd$", "pa$$w0rd$", NULL},
        {"interpolate: value is not re-expanded", "${DEDUPD_TEST_DOLLAR}", "${DEDUPD_TEST_HOST}", NULL},
        {"interpolate: unset variable", "host=${DEDUPD_TEST_UNSET}", NULL,
         "environment variable DEDUPD_TEST_UNSET is not set (use ${DEDUPD_TEST_UNSET:-default} "
         "for an optional value)"},
        {"interpolate: unterminated", "x${DEDUPD_TEST_HOST", NULL, "unterminated ${ in value"},
        {"interpolate: empty name", "${}", NULL, "empty variable name in ${}"},
        {"interpolate: empty name with default", "${:-x}", NULL, "empty variable name in ${}"},
};

static void interp_case(void **state)
{
        const struct interp_case *c = *state;
        char err[512] = "";
        char *out = config_interpolate(c->in, err, sizeof(err));

        if (c->want) {
                if (!out)
                        fail_msg("refused: %s", err);
                assert_string_equal(out, c->want);
        } else {
                if (out) {
                        print_message("got \"%s\"\n", out);
                        free(out);
                        fail_msg("expected a refusal");
                }
                assert_string_equal(err, c->err);
        }
        free(out);
}

static void interpolate_long_values(void **state)
{
        char big[5001], err[256];
        memset(big, 'x', 5000);
        big[5000] = '\0';
        setenv("DEDUPD_TEST_LONG", big, 1);

        char *out = config_interpolate("<${DEDUPD_TEST_LONG}|${DEDUPD_TEST_LONG}>", err, sizeof(err));
        assert_non_null(out);
        assert_int_equal(strlen(out), 10003);
        assert_int_equal(out[0], '<');
        assert_int_equal(out[5001], '|');
        assert_int_equal(out[10002], '>');
        assert_int_equal(strspn(out + 1, "x"), 5000);
        free(out);
        unsetenv("DEDUPD_TEST_LONG");
}

/* Hostile configs: each answered at once with the bound that refused it. */
static char *repeat(const char *prefix, const char *unit, size_t n, const char *suffix_unit)
{
        size_t pl = strlen(prefix), ul = strlen(unit), sl = suffix_unit ? strlen(suffix_unit) : 0;
        char *s = malloc(pl + n * (ul + sl) + 2), *w = s;
        memcpy(w, prefix, pl);
        w += pl;
        for (size_t i = 0; i < n; i++, w += ul)
                memcpy(w, unit, ul);
        for (size_t i = 0; i < n && suffix_unit; i++, w += sl)
                memcpy(w, suffix_unit, sl);
        *w++ = '\n';
        *w = '\0';
        return s;
}

static void hostile_case(const char *yaml, const char *prefix, const char *phrase)
{
        struct config_errors errs = {0};
        load_bad(yaml, &errs);
        assert_error(&errs, prefix, phrase);
        config_errors_clear(&errs);
}

static void hostile_deep_flow_sequence(void **state)
{
        (void)state;
        char *y = repeat("a: ", "[", 100000, "]");
        hostile_case(y, "t.yaml:1:35: nested deeper than 32 levels", "refused before parsing further");
        free(y);
}

static void hostile_unterminated_brackets(void **state)
{
        (void)state;
        char *y = repeat("a: ", "[", 100000, NULL);
        hostile_case(y, "t.yaml:1:", "nested deeper than 32 levels");
        free(y);
}

static void hostile_nested_flow_maps(void **state)
{
        (void)state;
        char *y = repeat("a: ", "{a: ", 50000, "}");
        hostile_case(y, "t.yaml:1:", "nested deeper than 32 levels");
        free(y);
}

static void hostile_too_many_nodes(void **state)
{
        (void)state;
        char *y = repeat("a: [", "1,", 150000, NULL);
        hostile_case(y, "t.yaml:1:", "more than 100000 YAML nodes");
        free(y);
}

static void hostile_too_large(void **state)
{
        (void)state;
        char *y = repeat("namespace: ", "x", 2 * 1024 * 1024, NULL);
        hostile_case(y, "t.yaml:1:1: the file is 2097164 bytes; a configuration may be at most 1048576 bytes", NULL);
        free(y);
}

static void hostile_template_of_many_parts(void **state)
{
        (void)state;
        char *t = repeat("", "{json:a}", 100000, NULL);
        t[strlen(t) - 1] = '\0';
        char *y = malloc(strlen(t) + 512);
        sprintf(y,
                "namespace: s\npostgres: {conninfo: x}\nkafka: {bootstrap.servers: b, group.id: g}\n"
                "topics:\n  - name: t\n    key: {subject: \"%s\", action: PAY}\n    handler: {path: h.so}\n",
                t);
        hostile_case(y, "t.yaml:6:20: 'topics[0].key.subject': key template is 800000 bytes; at most 1024", NULL);
        sprintf(y,
                "namespace: s\npostgres: {conninfo: x}\nkafka: {bootstrap.servers: b, group.id: g}\n"
                "topics:\n  - name: t\n    key: {subject: \"%.264s\", action: PAY}\n    handler: {path: h.so}\n",
                t);
        hostile_case(y, "t.yaml:6:20: 'topics[0].key.subject': key template has more than 32 parts", NULL);
        free(t);
        free(y);
}

static void hostile_long_value_is_clipped(void **state)
{
        (void)state;
        char *v = repeat("", "a", 500000, NULL);
        v[strlen(v) - 1] = '\0';
        char *y = malloc(strlen(v) + 256);
        sprintf(y, "namespace: s\nlog_level: \"%s\"\n", v);
        struct config_errors errs = {0};
        load_bad(y, &errs);
        assert_error(&errs,
                     "t.yaml:2:12: 'log_level': 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (500000 bytes)' "
                     "is not one of",
                     NULL);
        for (size_t i = 0; i < errs.cnt; i++)
                assert_true(strlen(errs.msgs[i]) < 400);
        config_errors_clear(&errs);
        free(v);
        free(y);
}

/* The effective configuration, from the same rows: defaults filled, secrets never shown. */
static void dump_shows_defaults_and_hides_secrets(void **state)
{
        (void)state;
        struct config *cfg = load_ok("namespace: shop\npostgres: {conninfo: \"host=db password=S3cret\"}\n"
                                     "kafka: {bootstrap.servers: b:9092, group.id: g, sasl.password: Hunter2}\n"
                                     "topics:\n  - name: pay\n    key: {subject: \"{json:id}\", action: PAY}\n"
                                     "    handler: {path: h.so}\n    mode: external\n");
        char *text = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&text, &len);
        assert_non_null(fp);
        config_dump(cfg, fp);
        fclose(fp);
        assert_contains(text, "namespace: shop\n");
        assert_contains(text, "log_level: info\n");
        assert_contains(text, "postgres.conninfo: (set, not shown)\n");
        assert_contains(text, "kafka.sasl.password: (set, not shown)\n");
        assert_contains(text, "kafka.bootstrap.servers: b:9092\n");
        assert_contains(text, "topics[0].batch.max_messages: 500\n");
        assert_contains(text, "topics[0].mode: external\n");
        assert_contains(text, "topics[0].external.lease_ms: 30s\n");
        assert_contains(text, "topics[0].dead_letter.topic: pay.dlq\n");
        assert_null(strstr(text, "S3cret"));
        assert_null(strstr(text, "Hunter2"));
        free(text);
        config_free(cfg);
}

static void nats_source_reads_and_hides_its_url(void **state)
{
        (void)state;
        struct config *cfg =
                load_ok("namespace: shop\nsource: nats\npostgres: {conninfo: host=db}\n"
                        "nats: {url: \"nats://u:Pa55@n:4222\", stream: ORDERS, max_ack_pending: 600,\n"
                        "       dead_letter: {subject: orders.dead}}\n"
                        "topics:\n  - name: orders.created\n    key: {subject: \"{json:id}\", action: PAY}\n"
                        "    handler: {path: h.so}\n");
        char *text = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&text, &len);
        assert_non_null(fp);
        assert_string_equal(config_source_name(cfg), "nats");
        assert_string_equal(nats_conf(cfg)->stream, "ORDERS");
        assert_int_equal(nats_conf(cfg)->max_ack_pending, 600);
        assert_int_equal(nats_conf(cfg)->ack_wait_ms, 30000);
        assert_string_equal(nats_conf(cfg)->dlq_subject, "orders.dead");
        assert_int_equal(kafka_props(cfg)->n, 0);
        config_dump(cfg, fp);
        fclose(fp);
        assert_contains(text, "source: nats\n");
        assert_contains(text, "nats.url: (set, not shown)\n");
        assert_contains(text, "nats.stream: ORDERS\n");
        assert_null(strstr(text, "Pa55"));
        free(text);
        config_free(cfg);
}

int main(void)
{
        static const struct CMUnitTest tests[] = {
                cmocka_unit_test(nats_source_reads_and_hides_its_url),
                cmocka_unit_test(dump_shows_defaults_and_hides_secrets),
                cmocka_unit_test(hostile_deep_flow_sequence),
                cmocka_unit_test(hostile_unterminated_brackets),
                cmocka_unit_test(hostile_nested_flow_maps),
                cmocka_unit_test(hostile_too_many_nodes),
                cmocka_unit_test(hostile_too_large),
                cmocka_unit_test(hostile_template_of_many_parts),
                cmocka_unit_test(hostile_long_value_is_clipped),
                cmocka_unit_test(valid_full_config),
                cmocka_unit_test(minimal_config_defaults),
                cmocka_unit_test(rabbitmq_config_defaults),
                cmocka_unit_test(rabbitmq_management_url_is_secret),
                cmocka_unit_test(workers_where_they_can_run),
                cmocka_unit_test(limits_payload_inherited_or_own),
                cmocka_unit_test(env_substitution),
                cmocka_unit_test(load_from_file),
                cmocka_unit_test(file_errors_name_the_file),
                cmocka_unit_test(kafka_errors_verbatim),
                cmocka_unit_test(several_errors_at_once),
                cmocka_unit_test(errors_accumulate),
                cmocka_unit_test(retention_and_modes_load),
                cmocka_unit_test(quoted_values_are_not_holes),
                cmocka_unit_test(reload_refuses_a_config_with_holes),
                cmocka_unit_test(durations),
                cmocka_unit_test(reference_lists_every_key),
                cmocka_unit_test(interpolate_long_values),
        };
        struct unit_list l = {0};

        setenv("DEDUPD_TEST_HOST", "db.internal", 1);
        setenv("DEDUPD_TEST_EMPTY", "", 1);
        setenv("DEDUPD_TEST_DOLLAR", "${DEDUPD_TEST_HOST}", 1);
        unsetenv("DEDUPD_TEST_UNSET");

        unit_add_tests(&l, tests, sizeof(tests) / sizeof(tests[0]));
        unit_add_table(&l, err_case, err_cases);
        unit_add_table(&l, interp_case, interp_cases);
        return unit_run("config", &l);
}
