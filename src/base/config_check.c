/* config_check: the checks across keys once every row is read — kafka properties dedupd owns, the retention inequality, each topic's derived settings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config_impl.h"
#include "base/isotime.h"
#include "base/keyspec.h"
#include "base/mem.h"
#include "base/tenant_name.h"

void config_check_classes(struct config_checks *w)
{
        struct config *cfg = w->cfg;
        for (size_t i = 0; i < cfg->class_cnt; i++) {
                const struct retention_class *c = &cfg->classes[i];
                int64_t need = c->max_retry_ms + c->clock_skew_ms + c->replay_window_ms;
                char a[64], b[64], d[64], e[64], f[64], g[64];
                for (size_t j = 0; j < i; j++)
                        if (!strcmp(cfg->classes[j].name, c->name))
                                config_errors_add(w->errs, w->file, c->line, c->col,
                                                  "retention class '%s' is defined twice", c->name);
                if (c->keep_ms > 0 && c->keep_ms <= need)
                        config_errors_add(w->errs, w->file, c->line, c->col,
                                          "retention class '%s': keep %s must exceed max_retry + clock_skew + "
                                          "replay_window = %s + %s + %s = %s; it is short by %s (a late retry "
                                          "after its key was purged would run again)",
                                          c->name, config_format_duration(c->keep_ms, a, sizeof(a)),
                                          config_format_duration(c->max_retry_ms, b, sizeof(b)),
                                          config_format_duration(c->clock_skew_ms, d, sizeof(d)),
                                          config_format_duration(c->replay_window_ms, e, sizeof(e)),
                                          config_format_duration(need, f, sizeof(f)),
                                          need > c->keep_ms ? config_format_duration(need - c->keep_ms, g, sizeof(g))
                                                            : "nothing, but it must be longer");
                if (c->response_ttl_ms > c->keep_ms)
                        config_errors_add(w->errs, w->file, c->line, c->col,
                                          "retention class '%s': response_ttl %s is longer than keep %s", c->name,
                                          config_format_duration(c->response_ttl_ms, a, sizeof(a)),
                                          config_format_duration(c->keep_ms, b, sizeof(b)));
        }
}

/* reply.allow: a list of names and prefixes, none empty. */
static void check_reply_allow(struct config_checks *w, const struct topic_conf *t)
{
        size_t k;
        json_t *v;
        if (!t->reply_allow)
                return;
        if (!json_is_array(t->reply_allow)) {
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': reply.allow must be a list of destinations", t->name);
                return;
        }
        json_array_foreach(t->reply_allow, k, v)
        {
                if (json_is_null(v))
                        continue; /* its ${...} failed: reported where it is */
                if (!json_is_string(v) || !*json_string_value(v))
                        config_errors_add(w->errs, w->file, t->line, t->col,
                                          "topic '%s': reply.allow[%zu]: a destination name, or a prefix "
                                          "ending in *",
                                          t->name, k);
        }
}

/* Where the topic's dead letters go (a broker's check may have said already). */
static void finish_dlq(struct config_checks *w, struct topic_conf *t)
{
        if (!t->dlq_topic || !*t->dlq_topic) {
                free(t->dlq_topic);
                t->dlq_topic = xasprintf("%s.dlq", t->name);
        }
        if (t->dlq_topic && !strcmp(t->dlq_topic, t->name))
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': the dead-letter topic cannot be the topic itself", t->name);
}

/* fingerprint.fields: a non-empty list of JSON paths. */
static void check_fingerprint_fields(struct config_checks *w, const struct topic_conf *t)
{
        size_t k;
        json_t *v;
        char err[512];
        if (!t->fingerprint_fields)
                return;
        if (!json_is_array(t->fingerprint_fields) || json_array_size(t->fingerprint_fields) == 0) {
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': fingerprint.fields must be a non-empty list of JSON paths", t->name);
                return;
        }
        json_array_foreach(t->fingerprint_fields, k, v)
        {
                if (json_is_null(v))
                        continue; /* its ${...} failed: reported where it is */
                /* The path as fingerprinting reads it, not wrapped in a
                 * template (where a '}' would end it early). */
                if (!json_is_string(v) || keyspec_path_check(json_string_value(v), err, sizeof(err)))
                        config_errors_add(w->errs, w->file, t->line, t->col, "topic '%s': fingerprint.fields[%zu]: %s",
                                          t->name, k, json_is_string(v) ? err : "not a path");
        }
}

/* The retention class the topic names. */
static void resolve_retention(struct config_checks *w, struct topic_conf *t)
{
        struct config *cfg = w->cfg;
        if (!t->retention_name)
                return;
        for (size_t k = 0; k < cfg->class_cnt; k++)
                if (!strcmp(cfg->classes[k].name, t->retention_name))
                        t->retention = &cfg->classes[k];
        if (!t->retention)
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': retention class '%s' is not defined in retention_classes", t->name,
                                  t->retention_name);
}

/* The key template, compiled once; {amqp:...} only where there is AMQP. */
static void compile_key(struct config_checks *w, struct topic_conf *t)
{
        char err[512];
        if (!t->key_subject)
                return;
        t->keyspec = keyspec_compile(t->key_subject, t->key_action, t->key_request, err, sizeof(err));
        if (!t->keyspec)
                config_errors_add(w->errs, w->file, t->line, t->col, "topic '%s': %s", t->name, err);
        else if (!w->cfg->broker->amqp_properties && keyspec_reads_amqp(t->keyspec))
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': {amqp:...} reads an AMQP property, which source: %s does not have",
                                  t->name, w->cfg->broker->name);
}

/* key.previous: compiled, its window read, and sense made of it. */
static void compile_previous_key(struct config_checks *w, struct topic_conf *t)
{
        char err[512];
        if (!t->key_prev_subject && !t->key_prev_action && !t->key_prev_request && !t->key_prev_until)
                return;
        if (!t->key_prev_subject || !t->key_prev_until) {
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': key.previous needs subject and until (the old template, and when the "
                                  "window ends)",
                                  t->name);
                return;
        }
        if (t->mode == MODE_EXTERNAL)
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': key.previous is for transactional mode (external mode claims one key "
                                  "with a lease)",
                                  t->name);
        if (t->key_version < 2)
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': key.previous is version %d's template: raise key.version to 2 or more",
                                  t->name, t->key_version - 1);
        if (isotime_parse(t->key_prev_until, &t->key_prev_until_ms, err, sizeof(err)))
                config_errors_add(w->errs, w->file, t->line, t->col, "topic '%s': key.previous.until: %s", t->name,
                                  err);
        t->prev_keyspec =
                keyspec_compile(t->key_prev_subject, t->key_prev_action, t->key_prev_request, err, sizeof(err));
        if (!t->prev_keyspec)
                config_errors_add(w->errs, w->file, t->line, t->col, "topic '%s': key.previous: %s", t->name, err);
}

/* parallel: a key to split by and a mode that can run on several connections. */
static void compile_parallel(struct config_checks *w, struct topic_conf *t)
{
        char err[512];
        if (t->parallel_workers < 1)
                t->parallel_workers = 1;
        if (t->parallel_workers > 1 && !t->parallel_key)
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': parallel.workers is %d but parallel.key is not set", t->name,
                                  t->parallel_workers);
        if (t->parallel_workers > 1 && t->mode == MODE_EXTERNAL)
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': external mode runs on one connection: parallel.workers must be 1",
                                  t->name);
        if (!t->parallel_key)
                return;
        if (!(t->parallel_keytmpl = keytmpl_compile(t->parallel_key, err, sizeof(err))))
                config_errors_add(w->errs, w->file, t->line, t->col, "topic '%s': parallel.key: %s", t->name, err);
        t->parallel_layout = xasprintf("%d:%s", t->parallel_workers, t->parallel_key);
}

/* tenant.retention: classes that exist, no shorter than the topic's own
 * (the one the broker's retention is checked against). */
static void check_tenant_retention(struct config_checks *w, struct topic_conf *t)
{
        const char *name;
        json_t *v;
        if (!t->tenant_retention)
                return;
        if (!json_is_object(t->tenant_retention)) {
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': tenant.retention: expected a mapping of tenant to retention class",
                                  t->name);
                return;
        }
        json_object_foreach(t->tenant_retention, name, v)
        {
                const char *cls = json_is_string(v) ? json_string_value(v) : "";
                const struct retention_class *c = config_class(w->cfg, cls);
                if (!tenant_name_ok(name, strlen(name)))
                        config_errors_add(w->errs, w->file, t->line, t->col,
                                          "topic '%s': tenant.retention: '%s' is not a tenant name", t->name, name);
                else if (!c)
                        config_errors_add(w->errs, w->file, t->line, t->col,
                                          "topic '%s': tenant.retention.%s: retention class '%s' is not defined in "
                                          "retention_classes",
                                          t->name, name, cls);
                else if (!t->retention)
                        config_errors_add(w->errs, w->file, t->line, t->col,
                                          "topic '%s': tenant.retention.%s: the topic has no retention class of its "
                                          "own (its keys never expire): a tenant's class would keep them shorter",
                                          t->name, name);
                else if (c->keep_ms < t->retention->keep_ms)
                        config_errors_add(w->errs, w->file, t->line, t->col,
                                          "topic '%s': tenant.retention.%s: class '%s' keeps keys shorter than the "
                                          "topic's class '%s' (the broker's retention is checked against that one)",
                                          t->name, name, cls, t->retention->name);
        }
}

/* bucket_from and keys.layout: partitioned — a template that compiles, and
 * nothing the partitioned layout does not keep. */
static void compile_bucket(struct config_checks *w, struct topic_conf *t)
{
        char err[512];
        const struct config *cfg = w->cfg;
        if (cfg->keys_layout != LAYOUT_PARTITIONED) {
                if (t->bucket_from)
                        config_errors_add(w->errs, w->file, t->line, t->col,
                                          "topic '%s': bucket_from is for keys.layout: partitioned", t->name);
                return;
        }
        if (t->bucket_from && !(t->bucket_keytmpl = keytmpl_compile(t->bucket_from, err, sizeof(err))))
                config_errors_add(w->errs, w->file, t->line, t->col, "topic '%s': bucket_from: %s", t->name, err);
        if (!t->retention)
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': keys.layout: partitioned needs a retention class: its keep says when "
                                  "a bucket's partition is dropped",
                                  t->name);
        if (t->mode == MODE_EXTERNAL)
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': keys.layout: partitioned is for transactional mode", t->name);
        if (t->tenant_quota || t->tenant_quotas || t->tenant_retention)
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': tenant.quota and tenant.retention count and expire keys one by one: "
                                  "not with keys.layout: partitioned, whose keys go a partition at a time",
                                  t->name);
        if (t->key_prev_subject && !t->bucket_from)
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': key.previous needs bucket_from under keys.layout: partitioned (a key "
                                  "by the message's timestamp is also looked up in the bucket before)",
                                  t->name);
}

/* tenant: a key that compiles, quotas that are numbers, a mode it works in. */
static void compile_tenant(struct config_checks *w, struct topic_conf *t)
{
        char err[512];
        const char *name;
        json_t *v;
        check_tenant_retention(w, t);
        if (!t->tenant_key) {
                if (t->tenant_quota || t->tenant_quotas || t->tenant_retention)
                        config_errors_add(w->errs, w->file, t->line, t->col,
                                          "topic '%s': tenant.quota needs tenant.key (whose message it is)", t->name);
                return;
        }
        if (t->mode == MODE_EXTERNAL)
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': tenant is for transactional mode (its quota is counted in the batch's "
                                  "transaction)",
                                  t->name);
        if (!(t->tenant_keytmpl = keytmpl_compile(t->tenant_key, err, sizeof(err))))
                config_errors_add(w->errs, w->file, t->line, t->col, "topic '%s': tenant.key: %s", t->name, err);
        if (t->tenant_quotas && !json_is_object(t->tenant_quotas)) {
                config_errors_add(w->errs, w->file, t->line, t->col,
                                  "topic '%s': tenant.quotas: expected a mapping of tenant to live keys", t->name);
                return;
        }
        json_object_foreach(t->tenant_quotas, name, v)
        {
                char *end;
                const char *q = json_is_string(v) ? json_string_value(v) : "";
                long n = strtol(q, &end, 10);
                if (!tenant_name_ok(name, strlen(name)))
                        config_errors_add(w->errs, w->file, t->line, t->col,
                                          "topic '%s': tenant.quotas: '%s' is not a tenant name (1 to 64 of A-Z a-z "
                                          "0-9 . _ -)",
                                          t->name, name);
                else if (!*q || *end || n < 0 || n > 2000000000)
                        config_errors_add(w->errs, w->file, t->line, t->col,
                                          "topic '%s': tenant.quotas.%s: '%s' is not a number of keys (0 to "
                                          "2000000000)",
                                          t->name, name, q);
        }
}

void config_finish_topics(struct config_checks *w)
{
        struct config *cfg = w->cfg;
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                struct topic_conf *t = &cfg->topics[i];
                if (!t->name)
                        continue;
                for (size_t j = 0; j < i; j++)
                        if (cfg->topics[j].name && !strcmp(cfg->topics[j].name, t->name))
                                config_errors_add(w->errs, w->file, t->line, t->col, "topic '%s' is configured twice",
                                                  t->name);
                finish_dlq(w, t);
                check_reply_allow(w, t);
                t->payload_bytes_own = t->max_payload_bytes > 0;
                if (!t->payload_bytes_own)
                        t->max_payload_bytes = cfg->limit_payload_bytes;
                if (t->retry_backoff_max_ms < t->retry_backoff_ms)
                        t->retry_backoff_max_ms = t->retry_backoff_ms;
                check_fingerprint_fields(w, t);
                resolve_retention(w, t);
                compile_key(w, t);
                compile_previous_key(w, t);
                if (t->on_failed == FAILED_RETRY && t->mode == MODE_EXTERNAL)
                        config_errors_add(w->errs, w->file, t->line, t->col,
                                          "topic '%s': on_failed: retry is for transactional mode (external mode's "
                                          "FAILED keys stay: the effect outside PostgreSQL cannot be taken back)",
                                          t->name);
                compile_parallel(w, t);
                compile_tenant(w, t);
                compile_bucket(w, t);
                if (cfg->workers > 1 && t->mode == MODE_EXTERNAL)
                        config_errors_add(w->errs, w->file, t->line, t->col,
                                          "topic '%s': external mode runs on one connection: workers must be 1 "
                                          "(it is %d)",
                                          t->name, cfg->workers);
        }
}

/* A broker's own key, though another broker is consumed: it would be silently ignored. */
void config_check_source(struct config_checks *w, const int *given, const int *line, const int *col)
{
        const struct config_broker *b;
        for (size_t i = 0; (b = config_broker_at(i)) && i < CONFIG_BROKERS_MAX; i++)
                if (given[i] && (int)i != w->cfg->source)
                        config_errors_add(w->errs, w->file, line[i], col[i],
                                          "%s: is used only with source: %s (this config consumes %s); remove it",
                                          b->name, b->name, w->cfg->broker->title);
}
