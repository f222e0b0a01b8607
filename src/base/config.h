/* config: the YAML configuration read with libyaml into the declarative table — reading, bounds, free and dump all follow the rows. */
#ifndef DEDUPD_CONFIG_H
#define DEDUPD_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "base/keyspec.h"

/** One entry of a verbatim map (`kafka:`: passed to librdkafka as it is). */
struct config_kv {
        char *name;
        char *value;
        int line, col;
};

/** A verbatim map: its entries in file order, and where it is. */
struct config_kvs {
        struct config_kv *v;
        size_t n;
        int seen;      /* the key was there, as a mapping */
        int line, col; /* where its entries start (the document's start when absent) */
};

/** The value of name in kv, or NULL. */
const char *config_kvs_get(const struct config_kvs *kv, const char *name);

/** A retention class (docs/design.md §8): keys expire at created_at + keep. */
struct retention_class {
        char *name;
        int line, col;
        int64_t keep_ms;
        int64_t max_retry_ms;
        int64_t clock_skew_ms;
        int64_t replay_window_ms;
        int64_t response_ttl_ms; /* 0: responses live as long as their key */
        int allow_shorter_than_topic;
};

enum topic_mode { MODE_TRANSACTIONAL = 0, MODE_EXTERNAL = 1 };
enum expired_policy { EXPIRED_DEAD_LETTER = 0, EXPIRED_SKIP, EXPIRED_REEXECUTE };
enum mismatch_policy { MISMATCH_ABSORB = 0, MISMATCH_DEAD_LETTER };
enum failed_policy { FAILED_ABSORB = 0, FAILED_RETRY };
/* keys.layout: one table, or a table partitioned by bucket (docs/partitioned-retention.md) */
enum key_layout { LAYOUT_HEAP = 0, LAYOUT_PARTITIONED };

struct keytmpl;

struct topic_conf {
        char *name;
        int line, col;

        /* key: */
        char *key_subject;
        char *key_action;
        char *key_request;
        struct keyspec *keyspec; /* compiled from the three above */
        int key_version;
        /* key.previous: the template of key_version - 1, probed until key_prev_until_ms */
        char *key_prev_subject, *key_prev_action, *key_prev_request, *key_prev_until;
        struct keyspec *prev_keyspec; /* NULL: no previous version */
        int64_t key_prev_until_ms;

        /* handler: */
        char *handler_path;
        json_t *handler_config;  /* the `config:` subtree, scalars as strings */
        int handler_per_message; /* handle() even when there is handle_batch */

        /* batch: */
        int batch_max_messages;
        int batch_max_wait_ms;
        int batch_adaptive;   /* a partial batch runs when the source has nothing more queued */
        int batch_timeout_ms; /* watchdog: a batch running longer is aborted */

        /* retry: */
        int retry_max_attempts;
        int retry_backoff_ms;
        int retry_backoff_max_ms;
        int retry_max_crashes; /* process crashes on one message before it is dead-lettered */

        /* dead_letter: */
        char *dlq_topic; /* default "<name>.dlq" */
        int dlq_create;  /* create it at start when missing */

        int max_payload_bytes; /* 0 in the file: limits.payload_bytes */
        int payload_bytes_own; /* set on the topic, not inherited from limits */

        /* mode: transactional (default) or external (docs/design.md §6) */
        enum topic_mode mode;
        /* external: */
        int64_t lease_ms;
        int64_t expire_grace_ms;
        enum expired_policy on_expired;
        enum failed_policy on_failed; /* a FAILED key's next message: absorbed, or run again after a while */
        int64_t on_failed_after_ms;
        int reconcile;        /* ask the handler's reconcile(), when it has one */
        int reconcile_tries;  /* reconcile() answers that could not tell, before on_expired for good */
        int reconcile_budget; /* keys asked per topic and reaper round */

        /* fingerprint: */
        json_t *fingerprint_fields; /* list of JSON paths; NULL: the whole payload */
        enum mismatch_policy on_mismatch;

        /* reply: a duplicate's stored first response goes back to the reply topic */
        char *reply_header; /* "" disables replies */
        char *correlation_header;
        json_t *reply_allow; /* list of destinations ("name", "prefix*"); NULL: any but dedupd's own */

        /* retention: */
        char *retention_name;
        const struct retention_class *retention; /* NULL: keys never expire */

        /* parallel: a partition's batch split by a key onto workers (docs/parallel-keys.md) */
        char *parallel_key;               /* template; NULL: off */
        int parallel_workers;             /* 1: off */
        struct keytmpl *parallel_keytmpl; /* compiled from parallel_key */
        char *parallel_layout;            /* "<workers>:<key>", what the per-worker positions were written under */

        /* tenant: a key part naming whose message it is, and what each tenant may keep (docs/tenants.md) */
        char *tenant_key;               /* template; NULL: no tenants */
        struct keytmpl *tenant_keytmpl; /* compiled from tenant_key */
        int tenant_quota;               /* live keys per tenant; 0: none */
        json_t *tenant_quotas;          /* {tenant: live keys}: overrides of tenant_quota */
        json_t *tenant_retention;       /* {tenant: retention class}: overrides of the topic's class */
        int tenant_metrics_top;         /* tenants with a metrics label of their own; the rest "other" */

        /* provenance: where absorbed duplicates come from (docs/duplicates.md) */
        int provenance_every;    /* one absorbed duplicate in this many is recorded; 0: none */
        char *provenance_header; /* the header naming who produced it; "": none */

        /* bucket_from: the time a key belongs to, under keys.layout: partitioned */
        char *bucket_from;              /* template; NULL: the message's own timestamp */
        struct keytmpl *bucket_keytmpl; /* compiled from bucket_from */
};

/** The most brokers one build knows (the broker table, src/source/brokers.c). */
#define CONFIG_BROKERS_MAX 8

struct config_broker;

struct config {
        char *path;
        int source;                                /* the consumed broker's place in the broker table (source: NAME) */
        const struct config_broker *broker;        /* that broker (base/config_impl.h) */
        void *broker_settings[CONFIG_BROKERS_MAX]; /* each broker's own settings, read through its rows */
        char *namespace;
        char *pg_conninfo;
        int log_level;          /* LOG_ERROR .. LOG_DEBUG (base/log.h) */
        int log_format;         /* enum log_format (base/log.h) */
        int startup_timeout_ms; /* 0: wait for ever */
        int workers;            /* partition workers: threads, each its own database connection */
        int shutdown_timeout_ms;
        int db_retry_max_ms;
        int db_probe_interval_ms; /* SELECT 1 on a connection idle this long; 0: never */
        int db_probe_timeout_ms;

        struct topic_conf *topics;
        size_t topic_cnt;

        struct retention_class *classes;
        size_t class_cnt;

        /* purge: */
        int purge_interval_ms;
        int purge_batch;
        /* outbox: */
        int outbox_interval_ms;
        int outbox_batch;
        int outbox_max_failures;     /* failed publishes before a row is given up */
        int outbox_retry_backoff_ms; /* wait after a row's first failure; doubles */
        int outbox_retry_backoff_max_ms;
        int outbox_publish_timeout_ms; /* longest the relay waits for the broker's answer */
        int64_t outbox_keep_ms;        /* sent rows are purged this long after; 0: never */
        /* limits: what one message, one batch and the outbox may hold (docs/configuring.md, Limits) */
        int limit_payload_bytes;  /* the topics' max_payload_bytes unless they set it */
        int limit_key_bytes;      /* a key's text; longer: dead letter */
        int limit_json_depth;     /* nesting of a payload read as JSON */
        int limit_headers;        /* headers of one message */
        int limit_batch_bytes;    /* payload bytes in one batch: it closes early */
        int limit_outbox_backlog; /* unsent outbox rows at which consumption pauses; 0: none */
        /* http: */
        char *http_listen;        /* "" : no endpoints */
        int http_max_connections; /* served at once */
        int http_max_connections_per_ip;
        int http_idle_timeout_s;     /* a connection silent this long is closed */
        int http_gauges_interval_ms; /* gauges read from the database */
        /* absorption_check: verify's proof on a sample, all the time (docs/duplicates.md) */
        int64_t absorption_interval_ms; /* 0: off */
        int absorption_sample;          /* keys per topic and check */
        /* keys: how keys are kept (docs/partitioned-retention.md) */
        int keys_layout;        /* enum key_layout */
        int64_t keys_bucket_ms; /* a bucket's width: whole days */
        int64_t keys_skew_ms;   /* how far a bucket may be from now, and a partition kept past keep */
};

/** The retention class called name, or NULL. */
const struct retention_class *config_class(const struct config *cfg, const char *name);

/** "1d 2h 3m 4s 5ms" (the largest units only) into buf. */
const char *config_format_duration(int64_t ms, char *buf, size_t bufsz);
/** "30s", "5m", "48h", "7d", "250ms", or plain milliseconds; -1 when invalid. */
int64_t config_parse_duration(const char *s);

/** Collected problems, each formatted "file:line:column: message". */
struct config_errors {
        char **msgs;
        size_t cnt;
        long *pos; /* line * 100000 + column of each, for ordering */
};

void config_errors_add(struct config_errors *errs, const char *file, int line, int col, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
void config_errors_clear(struct config_errors *errs);

/**
 * Read and validate a config file. Returns the config, or NULL with every
 * problem found in errs (unknown keys, wrong types, missing required
 * values, unset ${VARS}, bad key templates, bad kafka properties).
 */
struct config *config_load(const char *path, struct config_errors *errs) __attribute__((warn_unused_result));

/** Same, from a string (for tests); name is used in messages. */
struct config *config_load_string(const char *name, const char *yaml, struct config_errors *errs)
        __attribute__((warn_unused_result));

void config_free(struct config *cfg);

/**
 * SIGHUP: read path again and apply, in place, the settings whose rows
 * reload (dedupd --help-config marks them). applied lists what changed
 * ("log_level info -> debug"), restart what changed but waits for a
 * restart. Returns 0, or -1 with errs (live untouched).
 */
int config_reload(struct config *live, const char *path, struct config_errors *errs, char *applied, size_t asz,
                  char *restart, size_t rsz) __attribute__((warn_unused_result));

/** Every setting as it is in effect (defaults filled, ${VARS} replaced),
 *  one "key: value" line each; secrets are shown as "(set, not shown)". */
void config_dump(const struct config *cfg, FILE *fp);

/** The consumed broker's own settings (the struct its rows fill). */
void *config_broker_settings(const struct config *cfg);
/** Broker b's own settings in cfg (whether or not it is the one consumed). */
void *config_settings_of(const struct config *cfg, const struct config_broker *b);
/** The consumed broker's name, as `source:` names it ("kafka"). */
const char *config_source_name(const struct config *cfg);

/** Find a topic's config by name, or NULL. */
struct topic_conf *config_topic(const struct config *cfg, const char *name);

/** Scalar from a handler config subtree by dotted path, or NULL. */
const char *config_tree_get(const json_t *tree, const char *path);

/** Print the reference of every key (name, type, default, description). */
void config_print_reference(FILE *fp);
/** The same as Markdown, the settings that matter first (docs/configuration.md). */
void config_print_markdown(FILE *fp);
/** The same as the body of a man page (pandoc's Markdown, a definition list): dedupd.yaml(5). */
void config_print_man(FILE *fp);

/**
 * Expand ${NAME} and ${NAME:-default} in s. Returns a malloc'd string, or
 * NULL with a message in err (unset variable without default, bad syntax).
 */
char *config_interpolate(const char *s, char *err, size_t errsz);

#endif
