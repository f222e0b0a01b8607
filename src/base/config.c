/* config: the YAML configuration, read with libyaml into a declarative table. */
#include "base/config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <librdkafka/rdkafka.h>
#include <yaml.h>

enum ftype {
        F_STR,     /* char * */
        F_INT,     /* int, within [min, max] */
        F_SECTION, /* a nested mapping whose fields live in the same struct */
        F_KV,      /* kafka: a flat map passed through verbatim */
        F_TREE,    /* a subtree handed to the handler as JSON */
        F_TOPICS,  /* the list of topic mappings */
        F_DURATION, /* int64_t milliseconds: "30s", "48h", "7d", or plain ms */
        F_BOOL,    /* int: true/false */
        F_CLASSES, /* retention_classes: a mapping of name -> class */
};

struct field {
        const char *name;
        enum ftype type;
        size_t off;
        const char *def; /* default as text; NULL = none */
        int required;
        long min, max;
        const struct field *sub;
        int (*check)(const char *v, char *err, size_t errsz);
        const char *desc;
};

#define END_FIELDS {NULL, 0, 0, NULL, 0, 0, 0, NULL, NULL, NULL}

#define TOFF(m) offsetof(struct topic_conf, m)
#define COFF(m) offsetof(struct config, m)

static const struct field key_fields[] = {
        {"subject", F_STR, TOFF(key_subject), NULL, 1, 0, 0, NULL, keyspec_template_check,
         "The business entity: \"{json:order_id}\", \"{header:NAME}\", \"{key}\", literals, or a mix"},
        {"action", F_STR, TOFF(key_action), NULL, 0, 0, 0, NULL, keyspec_template_check,
         "What is done to the subject, usually a literal such as PAY"},
        {"request", F_STR, TOFF(key_request), NULL, 0, 0, 0, NULL, keyspec_template_check,
         "Optional caller-generated request id reused on retry, e.g. \"{header:request-id}\""},
        END_FIELDS,
};

static const struct field handler_fields[] = {
        {"path", F_STR, TOFF(handler_path), NULL, 1, 0, 0, NULL, NULL,
         "Path of the handler shared object (relative paths are relative to the working directory)"},
        {"config", F_TREE, TOFF(handler_config), NULL, 0, 0, 0, NULL, NULL,
         "Free-form subtree passed to the handler's init()"},
        END_FIELDS,
};

static const struct field batch_fields[] = {
        {"max_messages", F_INT, TOFF(batch_max_messages), "500", 0, 1, 100000, NULL, NULL,
         "Most messages in one batch (one PostgreSQL transaction)"},
        {"max_wait_ms", F_INT, TOFF(batch_max_wait_ms), "100", 0, 0, 60000, NULL, NULL,
         "Longest time a batch waits to fill before it is processed"},
        {"timeout_ms", F_INT, TOFF(batch_timeout_ms), "30000", 0, 100, 3600000, NULL, NULL,
         "Watchdog: a batch still running after this long is aborted (its SQL cancelled, then the "
         "process ended so the database rolls it back); keep it well below max.poll.interval.ms"},
        END_FIELDS,
};

static const struct field retry_fields[] = {
        {"max_attempts", F_INT, TOFF(retry_max_attempts), "5", 0, 1, 1000, NULL, NULL,
         "Attempts for a message whose handler returns RETRY before it is dead-lettered"},
        {"backoff_ms", F_INT, TOFF(retry_backoff_ms), "200", 0, 0, 600000, NULL, NULL,
         "First backoff after a failed batch; doubles on every retry"},
        {"backoff_max_ms", F_INT, TOFF(retry_backoff_max_ms), "10000", 0, 0, 3600000, NULL, NULL,
         "Longest backoff"},
        {"max_crashes", F_INT, TOFF(retry_max_crashes), "3", 0, 1, 1000, NULL, NULL,
         "Process crashes (or watchdog aborts) on one message before it is dead-lettered as a crash loop"},
        END_FIELDS,
};

static const struct field dlq_fields[] = {
        {"topic", F_STR, TOFF(dlq_topic), NULL, 0, 0, 0, NULL, NULL,
         "Dead-letter topic (default: <topic>.dlq); must exist unless create is true"},
        {"create", F_BOOL, TOFF(dlq_create), "false", 0, 0, 0, NULL, NULL,
         "Create the dead-letter topic at start when it is missing (broker's default partitions and "
         "replication, max.message.bytes sized to hold whatever the topic holds)"},
        END_FIELDS,
};

/* A value echoed in a message: whole when short, else its start and its size. */
#define CLIP_SZ 96
static const char *clip(const char *v, char buf[CLIP_SZ])
{
        size_t n = strlen(v);
        if (n <= 64)
                return v;
        snprintf(buf, CLIP_SZ, "%.48s... (%zu bytes)", v, n);
        return buf;
}

static int check_one_of(const char *v, const char *const *allowed, char *err, size_t errsz)
{
        char list[256] = "";
        for (const char *const *a = allowed; *a; a++) {
                if (!strcmp(v, *a))
                        return 0;
                strncat(list, *a, sizeof(list) - strlen(list) - 3);
                if (a[1])
                        strncat(list, ", ", sizeof(list) - strlen(list) - 1);
        }
        char c[CLIP_SZ];
        snprintf(err, errsz, "'%s' is not one of %s", clip(v, c), list);
        return -1;
}

static int check_mode(const char *v, char *err, size_t errsz)
{
        static const char *const allowed[] = {"transactional", "external", NULL};
        return check_one_of(v, allowed, err, errsz);
}

static int check_on_expired(const char *v, char *err, size_t errsz)
{
        static const char *const allowed[] = {"dead-letter", "skip", "reexecute", NULL};
        return check_one_of(v, allowed, err, errsz);
}

static int check_on_mismatch(const char *v, char *err, size_t errsz)
{
        static const char *const allowed[] = {"absorb", "dead-letter", NULL};
        return check_one_of(v, allowed, err, errsz);
}

static const struct field external_fields[] = {
        {"lease_ms", F_DURATION, TOFF(lease_ms), "30s", 0, 1, 0, NULL, NULL,
         "How long a claimed PENDING key belongs to its owner; a duplicate meeting a live lease backs off"},
        {"expire_after", F_DURATION, TOFF(expire_grace_ms), "10m", 0, 0, 0, NULL, NULL,
         "The reaper marks a PENDING key EXPIRED (in doubt) this long after its lease ran out"},
        {"on_expired", F_STR, TOFF(on_expired_name), "dead-letter", 0, 0, 0, NULL, check_on_expired,
         "A message whose key is EXPIRED: dead-letter (for reconciliation), skip, or reexecute"},
        END_FIELDS,
};

static const struct field fingerprint_fields[] = {
        {"fields", F_TREE, TOFF(fingerprint_fields), NULL, 0, 0, 0, NULL, NULL,
         "List of JSON paths fingerprinted instead of the whole payload, e.g. [user_id, amount]"},
        {"on_mismatch", F_STR, TOFF(on_mismatch_name), "absorb", 0, 0, 0, NULL, check_on_mismatch,
         "Same key, different fingerprint: absorb (count and log) or dead-letter with both fingerprints"},
        END_FIELDS,
};

static const struct field reply_fields[] = {
        {"header", F_STR, TOFF(reply_header), "reply-to", 0, 0, 0, NULL, NULL,
         "Header naming the reply topic; \"\" disables replies"},
        {"correlation_header", F_STR, TOFF(correlation_header), "correlation-id", 0, 0, 0, NULL, NULL,
         "Header copied to the reply (and used as its Kafka key)"},
        END_FIELDS,
};

static const struct field topic_fields[] = {
        {"name", F_STR, TOFF(name), NULL, 1, 0, 0, NULL, NULL, "Kafka topic to consume"},
        {"key", F_SECTION, 0, NULL, 1, 0, 0, key_fields, NULL,
         "How the idempotency key subject/action[/request] is built"},
        {"handler", F_SECTION, 0, NULL, 1, 0, 0, handler_fields, NULL, "The handler shared object"},
        {"batch", F_SECTION, 0, NULL, 0, 0, 0, batch_fields, NULL, "Batch limits"},
        {"retry", F_SECTION, 0, NULL, 0, 0, 0, retry_fields, NULL,
         "Retry budget for handler RETRY results"},
        {"dead_letter", F_SECTION, 0, NULL, 0, 0, 0, dlq_fields, NULL, "Where unprocessable messages go"},
        {"max_payload_bytes", F_INT, TOFF(max_payload_bytes), "1000000", 0, 0, 1000000000, NULL, NULL,
         "Larger payloads are dead-lettered unprocessed; the dead-letter topic must hold this plus 16 KiB "
         "(Kafka's default max.message.bytes, 1048588, holds the default)"},
        {"mode", F_STR, TOFF(mode_name), "transactional", 0, 0, 0, NULL, check_mode,
         "transactional (the handler's effect commits with the key) or external (effects outside "
         "PostgreSQL: claim PENDING with a lease, run, finish; design section 6)"},
        {"external", F_SECTION, 0, NULL, 0, 0, 0, external_fields, NULL, "Settings of mode: external"},
        {"fingerprint", F_SECTION, 0, NULL, 0, 0, 0, fingerprint_fields, NULL,
         "What is fingerprinted, and what a same-key-different-fingerprint duplicate gets"},
        {"reply", F_SECTION, 0, NULL, 0, 0, 0, reply_fields, NULL,
         "Where a duplicate's stored first response is published again"},
        {"retention", F_STR, TOFF(retention_name), NULL, 0, 0, 0, NULL, NULL,
         "Name of a retention class; without one, keys never expire"},
        END_FIELDS,
};

#define ROFF(m) offsetof(struct retention_class, m)
static const struct field class_fields[] = {
        {"keep", F_DURATION, ROFF(keep_ms), NULL, 1, 1, 0, NULL, NULL,
         "How long a key is kept after it was first seen; must exceed max_retry + clock_skew + replay_window"},
        {"max_retry", F_DURATION, ROFF(max_retry_ms), "0", 0, 0, 0, NULL, NULL,
         "Longest time over which a producer, gateway or the broker may retry a message"},
        {"clock_skew", F_DURATION, ROFF(clock_skew_ms), "0", 0, 0, 0, NULL, NULL,
         "Allowance for clocks that disagree"},
        {"replay_window", F_DURATION, ROFF(replay_window_ms), "0", 0, 0, 0, NULL, NULL,
         "How far back an operator may replay by hand"},
        {"response_ttl", F_DURATION, ROFF(response_ttl_ms), "0", 0, 0, 0, NULL, NULL,
         "Drop stored responses after this (the key and fingerprint stay); 0 keeps them with the key"},
        {"allow_shorter_than_topic", F_BOOL, ROFF(allow_shorter_than_topic), "false", 0, 0, 0, NULL, NULL,
         "Accept keep shorter than the topic's own retention.ms (a message still in the topic can be replayed)"},
        END_FIELDS,
};

static const struct field purge_fields[] = {
        {"interval_ms", F_INT, COFF(purge_interval_ms), "60000", 0, 0, 86400000, NULL, NULL,
         "How often the daemon purges expired keys (0: never; use dedupctl purge)"},
        {"batch", F_INT, COFF(purge_batch), "1000", 0, 1, 100000, NULL, NULL,
         "Keys deleted per statement: small batches keep locks short"},
        END_FIELDS,
};

static const struct field outbox_fields[] = {
        {"interval_ms", F_INT, COFF(outbox_interval_ms), "1000", 0, 10, 600000, NULL, NULL,
         "How often the relay looks for unsent outbox rows (it also runs after every batch that emitted)"},
        {"batch", F_INT, COFF(outbox_batch), "500", 0, 1, 100000, NULL, NULL,
         "Outbox rows published per round"},
        END_FIELDS,
};

static const struct field postgres_fields[] = {
        {"conninfo", F_STR, COFF(pg_conninfo), NULL, 1, 0, 0, NULL, NULL,
         "libpq connection string or URI; put the password in ${ENV} or ~/.pgpass (never logged)"},
        {"retry_max_ms", F_INT, COFF(db_retry_max_ms), "5000", 0, 10, 600000, NULL, NULL,
         "Longest wait between reconnection attempts while the database is down"},
        END_FIELDS,
};

static int check_log_level(const char *v, char *err, size_t errsz)
{
        if (!strcmp(v, "error") || !strcmp(v, "warn") || !strcmp(v, "info") || !strcmp(v, "debug"))
                return 0;
        char c[CLIP_SZ];
        snprintf(err, errsz, "'%s' is not one of error, warn, info, debug", clip(v, c));
        return -1;
}

static const struct field top_fields[] = {
        {"namespace", F_STR, COFF(namespace), NULL, 1, 0, 0, NULL, NULL,
         "Dedup scope: the service's name. Not the consumer group, which changes with a "
         "blue/green deploy while the dedup record must not"},
        {"log_level", F_STR, COFF(log_level), "info", 0, 0, 0, NULL, check_log_level,
         "error, warn, info or debug"},
        {"shutdown_timeout_ms", F_INT, COFF(shutdown_timeout_ms), "10000", 0, 0, 600000, NULL, NULL,
         "Longest a clean shutdown may take before dedupd exits anyway"},
        {"postgres", F_SECTION, 0, NULL, 1, 0, 0, postgres_fields, NULL, "The database"},
        {"kafka", F_KV, 0, NULL, 1, 0, 0, NULL, NULL,
         "librdkafka properties passed verbatim (bootstrap.servers and group.id required)"},
        {"topics", F_TOPICS, 0, NULL, 1, 0, 0, topic_fields, NULL, "The topics to consume, one entry each"},
        {"retention_classes", F_CLASSES, 0, NULL, 0, 0, 0, class_fields, NULL,
         "Named retention classes (design section 8); a topic names one with retention:"},
        {"purge", F_SECTION, 0, NULL, 0, 0, 0, purge_fields, NULL, "Deleting expired keys"},
        {"outbox", F_SECTION, 0, NULL, 0, 0, 0, outbox_fields, NULL, "The outbox relay"},
        END_FIELDS,
};

/* ---- durations ----------------------------------------------------------- */

int64_t config_parse_duration(const char *s)
{
        static const struct { const char *unit; int64_t ms; } units[] = {
                {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}, {"w", 604800000},
        };
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno || v < 0)
                return -1;
        while (*end == ' ')
                end++;
        if (!*end)
                return v; /* plain milliseconds */
        for (size_t i = 0; i < sizeof(units) / sizeof(*units); i++)
                if (!strcmp(end, units[i].unit)) {
                        if (v > INT64_MAX / units[i].ms)
                                return -1;
                        return v * units[i].ms;
                }
        return -1;
}

const char *config_format_duration(int64_t ms, char *buf, size_t bufsz)
{
        static const struct { const char *unit; int64_t ms; } units[] = {
                {"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1},
        };
        size_t off = 0;
        buf[0] = '\0';
        if (ms == 0) {
                snprintf(buf, bufsz, "0s");
                return buf;
        }
        for (size_t i = 0; i < sizeof(units) / sizeof(*units) && ms > 0; i++) {
                if (ms < units[i].ms)
                        continue;
                off += (size_t)snprintf(buf + off, bufsz > off ? bufsz - off : 0, "%s%lld%s",
                                        off ? " " : "", (long long)(ms / units[i].ms), units[i].unit);
                ms %= units[i].ms;
        }
        return buf;
}

/* ---- errors ------------------------------------------------------------ */

void config_errors_add(struct config_errors *errs, const char *file, int line, int col,
                       const char *fmt, ...)
{
        char msg[1024];
        char *full = NULL;
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (asprintf(&full, "%s:%d:%d: %s", file, line, col, msg) < 0)
                return;
        char **n = realloc(errs->msgs, (errs->cnt + 1) * sizeof(*n));
        if (!n) {
                free(full);
                return;
        }
        errs->msgs = n;
        long *p = realloc(errs->pos, (errs->cnt + 1) * sizeof(*p));
        if (!p) {
                free(full);
                return;
        }
        errs->pos = p;
        errs->pos[errs->cnt] = (long)line * 100000 + col;
        errs->msgs[errs->cnt++] = full;
}

void config_errors_clear(struct config_errors *errs)
{
        for (size_t i = 0; i < errs->cnt; i++)
                free(errs->msgs[i]);
        free(errs->msgs);
        free(errs->pos);
        errs->msgs = NULL;
        errs->pos = NULL;
        errs->cnt = 0;
}

/* ---- ${ENV} interpolation ------------------------------------------------ */

char *config_interpolate(const char *s, char *err, size_t errsz)
{
        size_t cap = strlen(s) + 64, len = 0;
        char *out = malloc(cap);

        if (!out) {
                snprintf(err, errsz, "out of memory");
                return NULL;
        }
        while (*s) {
                const char *piece = s;
                size_t n = 1;
                char *name = NULL;
                if (s[0] == '$' && s[1] == '{') {
                        const char *end = strchr(s + 2, '}');
                        if (!end) {
                                snprintf(err, errsz, "unterminated ${ in value");
                                free(out);
                                return NULL;
                        }
                        name = strndup(s + 2, (size_t)(end - s - 2));
                        char *dflt = strstr(name, ":-");
                        if (dflt) {
                                *dflt = '\0';
                                dflt += 2;
                        }
                        if (!*name) {
                                snprintf(err, errsz, "empty variable name in ${}");
                                free(name);
                                free(out);
                                return NULL;
                        }
                        const char *val = getenv(name);
                        if (!val || (!*val && dflt))
                                val = dflt;
                        if (!val) {
                                snprintf(err, errsz,
                                         "environment variable %s is not set (use ${%s:-default} "
                                         "for an optional value)",
                                         name, name);
                                free(name);
                                free(out);
                                return NULL;
                        }
                        piece = val;
                        n = strlen(val);
                        s = end + 1;
                } else {
                        s++;
                }
                if (len + n + 1 > cap) {
                        cap = (len + n + 1) * 2;
                        char *np = realloc(out, cap);
                        if (!np) {
                                free(name);
                                free(out);
                                snprintf(err, errsz, "out of memory");
                                return NULL;
                        }
                        out = np;
                }
                memcpy(out + len, piece, n);
                len += n;
                free(name);
        }
        out[len] = '\0';
        return out;
}

/* ---- walking the document ------------------------------------------------ */

struct walk {
        const char *file;
        yaml_document_t *doc;
        struct config_errors *errs;
        struct config *cfg;
        int kafka_seen;
        int kafka_line, kafka_col; /* where `kafka:` entries start, for "missing" errors */
        size_t tree_budget;        /* values left for handler config subtrees */
        int tree_err;              /* reported a too deep/large subtree already */
};

#define TREE_MAX_DEPTH 64
#define CONFIG_MAX_BYTES (1024 * 1024) /* a configuration file */
#define CONFIG_MAX_DEPTH 32            /* YAML nesting */
#define CONFIG_MAX_NODES 100000        /* YAML events (scalars, starts and ends) */
#define TREE_MAX_VALUES 100000

#define NODE_LINE(n) ((int)(n)->start_mark.line + 1)
#define NODE_COL(n) ((int)(n)->start_mark.column + 1)

static void werr(struct walk *w, const yaml_node_t *n, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void werr(struct walk *w, const yaml_node_t *n, const char *fmt, ...)
{
        char msg[900];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        config_errors_add(w->errs, w->file, n ? NODE_LINE(n) : 1, n ? NODE_COL(n) : 1, "%s", msg);
}

static const char *scalar(const yaml_node_t *n)
{
        return (const char *)n->data.scalar.value;
}

static const char *node_kind(const yaml_node_t *n)
{
        switch (n->type) {
        case YAML_SCALAR_NODE: return "a scalar";
        case YAML_SEQUENCE_NODE: return "a list";
        case YAML_MAPPING_NODE: return "a mapping";
        default: return "nothing";
        }
}

/* Interpolated copy of a scalar node, or NULL after reporting. */
static char *scalar_value(struct walk *w, const yaml_node_t *n, const char *path)
{
        char err[512];
        char *v;
        if (n->type != YAML_SCALAR_NODE) {
                werr(w, n, "'%s' must be a scalar, not %s", path, node_kind(n));
                return NULL;
        }
        v = config_interpolate(scalar(n), err, sizeof(err));
        if (!v)
                werr(w, n, "'%s': %s", path, err);
        return v;
}

static int parse_int(const char *s, long min, long max, int *out, char *err, size_t errsz)
{
        char *end;
        long v;
        errno = 0;
        v = strtol(s, &end, 10);
        if (!*s || *end || errno) {
                char c[CLIP_SZ];
                snprintf(err, errsz, "'%s' is not an integer", clip(s, c));
                return -1;
        }
        if (v < min || v > max) {
                snprintf(err, errsz, "%ld is out of range [%ld, %ld]", v, min, max);
                return -1;
        }
        *out = (int)v;
        return 0;
}

static void fields_defaults(const struct field *fields, void *base)
{
        for (const struct field *f = fields; f->name; f++) {
                if (f->type == F_SECTION)
                        fields_defaults(f->sub, base);
                else if (f->type == F_INT && f->def)
                        *(int *)((char *)base + f->off) = atoi(f->def);
                else if (f->type == F_STR && f->def)
                        *(char **)((char *)base + f->off) = strdup(f->def);
                else if (f->type == F_DURATION && f->def)
                        *(int64_t *)((char *)base + f->off) = config_parse_duration(f->def);
                else if (f->type == F_BOOL && f->def)
                        *(int *)((char *)base + f->off) = !strcmp(f->def, "true");
        }
}

static void fields_require(struct walk *w, const yaml_node_t *at, const struct field *fields,
                           const char *prefix)
{
        for (const struct field *f = fields; f->name; f++)
                if (f->required)
                        werr(w, at, "missing required key '%s%s'", prefix, f->name);
}

static const yaml_node_t *node(struct walk *w, int idx)
{
        return yaml_document_get_node(w->doc, idx);
}

static json_t *tree_to_json(struct walk *w, const yaml_node_t *n, const char *path, int depth)
{
        json_t *j = NULL;
        /* Aliases can make a tree recursive (&a [*a]) or explode in size. */
        if (depth > TREE_MAX_DEPTH || w->tree_budget == 0) {
                if (!w->tree_err)
                        werr(w, n, "'%s' is nested deeper than %d levels or holds more than %d values "
                                   "(a recursive YAML alias?)",
                             path, TREE_MAX_DEPTH, TREE_MAX_VALUES);
                w->tree_err = 1;
                return json_null();
        }
        w->tree_budget--;
        if (n->type == YAML_SCALAR_NODE) {
                char *v = scalar_value(w, n, path);
                if (v)
                        j = json_string(v);
                free(v);
                return j ? j : json_null();
        }
        if (n->type == YAML_SEQUENCE_NODE) {
                j = json_array();
                for (yaml_node_item_t *it = n->data.sequence.items.start;
                     it < n->data.sequence.items.top && !w->tree_err; it++)
                        json_array_append_new(j, tree_to_json(w, node(w, *it), path, depth + 1));
                return j;
        }
        j = json_object();
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
             p < n->data.mapping.pairs.top && !w->tree_err; p++) {
                const yaml_node_t *k = node(w, p->key);
                if (k->type != YAML_SCALAR_NODE) {
                        werr(w, k, "'%s': keys must be scalars", path);
                        continue;
                }
                json_object_set_new(j, scalar(k), tree_to_json(w, node(w, p->value), path, depth + 1));
        }
        return j;
}

static void walk_topics(struct walk *w, const yaml_node_t *n);
static void walk_classes(struct walk *w, const yaml_node_t *n, const struct field *fields);
static void walk_kafka(struct walk *w, const yaml_node_t *n);

static void walk_map(struct walk *w, const yaml_node_t *map, const struct field *fields,
                     void *base, const char *prefix)
{
        size_t nf = 0;
        char path[256];

        for (const struct field *f = fields; f->name; f++)
                nf++;
        int seen[nf];
        memset(seen, 0, sizeof(seen));

        if (map->type != YAML_MAPPING_NODE) {
                werr(w, map, "'%s' must be a mapping, not %s", *prefix ? prefix : "top level",
                     node_kind(map));
                return;
        }
        for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
                const yaml_node_t *k = node(w, p->key), *v = node(w, p->value);
                const struct field *f;
                size_t i = 0;

                if (k->type != YAML_SCALAR_NODE) {
                        werr(w, k, "keys must be scalars");
                        continue;
                }
                for (f = fields; f->name; f++, i++)
                        if (!strcmp(f->name, scalar(k)))
                                break;
                snprintf(path, sizeof(path), "%s%s", prefix, scalar(k));
                if (!f->name) {
                        char known[512] = "";
                        for (const struct field *g = fields; g->name; g++) {
                                strncat(known, g->name, sizeof(known) - strlen(known) - 3);
                                if (g[1].name)
                                        strncat(known, ", ", sizeof(known) - strlen(known) - 1);
                        }
                        werr(w, k, "unknown key '%s' (expected one of: %s)", path, known);
                        continue;
                }
                if (seen[i]) {
                        werr(w, k, "duplicate key '%s'", path);
                        continue;
                }
                seen[i] = 1;

                void *slot = (char *)base + f->off;
                switch (f->type) {
                case F_STR: {
                        char *s = scalar_value(w, v, path);
                        char err[512];
                        if (!s)
                                break;
                        if (f->check && f->check(s, err, sizeof(err))) {
                                werr(w, v, "'%s': %s", path, err);
                                free(s);
                                break;
                        }
                        free(*(char **)slot);
                        *(char **)slot = s;
                        break;
                }
                case F_INT: {
                        char *s = scalar_value(w, v, path);
                        char err[256];
                        if (s && parse_int(s, f->min, f->max, (int *)slot, err, sizeof(err)))
                                werr(w, v, "'%s': %s", path, err);
                        free(s);
                        break;
                }
                case F_SECTION: {
                        char sub[256];
                        if (v->type != YAML_MAPPING_NODE) {
                                werr(w, v, "'%s' must be a mapping, not %s", path, node_kind(v));
                                break;
                        }
                        snprintf(sub, sizeof(sub), "%s.", path);
                        walk_map(w, v, f->sub, base, sub);
                        break;
                }
                case F_DURATION: {
                        char *v2 = scalar_value(w, v, path), c[CLIP_SZ];
                        if (!v2)
                                break;
                        int64_t ms = config_parse_duration(v2);
                        if (ms < 0)
                                werr(w, v, "'%s': '%s' is not a duration (e.g. 250ms, 30s, 5m, 48h, 7d)", path,
                                     clip(v2, c));
                        else if (ms < f->min)
                                werr(w, v, "'%s': must be at least %ld ms", path, f->min);
                        else
                                *(int64_t *)slot = ms;
                        free(v2);
                        break;
                }
                case F_BOOL: {
                        char *v2 = scalar_value(w, v, path), c[CLIP_SZ];
                        if (!v2)
                                break;
                        if (!strcmp(v2, "true") || !strcmp(v2, "yes") || !strcmp(v2, "on"))
                                *(int *)slot = 1;
                        else if (!strcmp(v2, "false") || !strcmp(v2, "no") || !strcmp(v2, "off"))
                                *(int *)slot = 0;
                        else
                                werr(w, v, "'%s': '%s' is not true or false", path, clip(v2, c));
                        free(v2);
                        break;
                }
                case F_CLASSES:
                        walk_classes(w, v, f->sub);
                        break;
                case F_TREE:
                        json_decref(*(json_t **)slot);
                        *(json_t **)slot = tree_to_json(w, v, path, 0);
                        break;
                case F_KV:
                        walk_kafka(w, v);
                        break;
                case F_TOPICS:
                        walk_topics(w, v);
                        break;
                }
        }
        size_t i = 0;
        for (const struct field *f = fields; f->name; f++, i++) {
                if (seen[i] || !f->required)
                        continue;
                if (f->type == F_SECTION) {
                        char sub[256];
                        snprintf(sub, sizeof(sub), "%s%s.", prefix, f->name);
                        fields_require(w, map, f->sub, sub);
                } else {
                        werr(w, map, "missing required key '%s%s'", prefix, f->name);
                }
        }
}

static void walk_kafka(struct walk *w, const yaml_node_t *n)
{
        struct config *cfg = w->cfg;
        w->kafka_line = NODE_LINE(n);
        w->kafka_col = NODE_COL(n);
        if (n->type != YAML_MAPPING_NODE) {
                werr(w, n, "'kafka' must be a mapping of librdkafka properties, not %s", node_kind(n));
                return;
        }
        w->kafka_seen = 1;
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
                const yaml_node_t *k = node(w, p->key), *v = node(w, p->value);
                char path[256];
                if (k->type != YAML_SCALAR_NODE) {
                        werr(w, k, "kafka: keys must be scalars");
                        continue;
                }
                snprintf(path, sizeof(path), "kafka.%s", scalar(k));
                char *val = scalar_value(w, v, path);
                if (!val)
                        continue;
                struct config_kv *nk = realloc(cfg->kafka, (cfg->kafka_cnt + 1) * sizeof(*nk));
                if (!nk) {
                        free(val);
                        return;
                }
                cfg->kafka = nk;
                cfg->kafka[cfg->kafka_cnt++] =
                        (struct config_kv){strdup(scalar(k)), val, NODE_LINE(v), NODE_COL(v)};
        }
}

static void walk_topics(struct walk *w, const yaml_node_t *n)
{
        struct config *cfg = w->cfg;
        if (n->type != YAML_SEQUENCE_NODE) {
                werr(w, n, "'topics' must be a list, not %s", node_kind(n));
                return;
        }
        if (n->data.sequence.items.start == n->data.sequence.items.top)
                werr(w, n, "'topics' is empty: configure at least one topic");
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
                const yaml_node_t *tn = node(w, *it);
                struct topic_conf *nt = realloc(cfg->topics, (cfg->topic_cnt + 1) * sizeof(*nt));
                char prefix[64];
                if (!nt)
                        return;
                cfg->topics = nt;
                struct topic_conf *t = &cfg->topics[cfg->topic_cnt];
                memset(t, 0, sizeof(*t));
                t->line = NODE_LINE(tn);
                t->col = NODE_COL(tn);
                fields_defaults(topic_fields, t);
                snprintf(prefix, sizeof(prefix), "topics[%zu].", cfg->topic_cnt);
                cfg->topic_cnt++;
                walk_map(w, tn, topic_fields, t, prefix);
        }
}

static void walk_classes(struct walk *w, const yaml_node_t *n, const struct field *fields)
{
        struct config *cfg = w->cfg;
        if (n->type != YAML_MAPPING_NODE) {
                werr(w, n, "'retention_classes' must be a mapping of class names, not %s", node_kind(n));
                return;
        }
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
                const yaml_node_t *k = node(w, p->key), *v = node(w, p->value);
                char prefix[160];
                if (k->type != YAML_SCALAR_NODE) {
                        werr(w, k, "retention class names must be scalars");
                        continue;
                }
                struct retention_class *nc = realloc(cfg->classes, (cfg->class_cnt + 1) * sizeof(*nc));
                if (!nc)
                        return;
                cfg->classes = nc;
                struct retention_class *c = &cfg->classes[cfg->class_cnt++];
                memset(c, 0, sizeof(*c));
                c->name = strdup(scalar(k));
                c->line = NODE_LINE(k);
                c->col = NODE_COL(k);
                fields_defaults(fields, c);
                snprintf(prefix, sizeof(prefix), "retention_classes.%s.", scalar(k));
                walk_map(w, v, fields, c, prefix);
        }
}

/* Design section 8: keep > max retry span + clock skew + manual replay window. */
static void check_classes(struct walk *w)
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
                        config_errors_add(
                                w->errs, w->file, c->line, c->col,
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
                                          "retention class '%s': response_ttl %s is longer than keep %s",
                                          c->name, config_format_duration(c->response_ttl_ms, a, sizeof(a)),
                                          config_format_duration(c->keep_ms, b, sizeof(b)));
        }
}

/* Properties dedupd owns: setting them would break the guarantee. */
static void check_kafka(struct walk *w)
{
        struct config *cfg = w->cfg;
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        int have_bootstrap = 0, have_group = 0;

        for (size_t i = 0; i < cfg->kafka_cnt; i++) {
                const struct config_kv *kv = &cfg->kafka[i];
                char errstr[512];
                if (!strcmp(kv->name, "enable.auto.offset.store")) {
                        config_errors_add(w->errs, w->file, kv->line, kv->col,
                                          "kafka.enable.auto.offset.store: dedupd stores offsets "
                                          "itself, only after the database COMMIT; remove this key");
                        continue;
                }
                if (!strcmp(kv->name, "partition.assignment.strategy") &&
                    strstr(kv->value, "cooperative")) {
                        config_errors_add(w->errs, w->file, kv->line, kv->col,
                                          "kafka.partition.assignment.strategy: cooperative-sticky has "
                                          "known bugs in librdkafka 2.0.x; use range or roundrobin");
                        continue;
                }
                if (!strcmp(kv->name, "bootstrap.servers") || !strcmp(kv->name, "metadata.broker.list"))
                        have_bootstrap = *kv->value != '\0';
                if (!strcmp(kv->name, "group.id"))
                        have_group = *kv->value != '\0';
                if (rd_kafka_conf_set(conf, kv->name, kv->value, errstr, sizeof(errstr)) !=
                    RD_KAFKA_CONF_OK)
                        config_errors_add(w->errs, w->file, kv->line, kv->col, "kafka.%s: %s", kv->name,
                                          errstr);
        }
        rd_kafka_conf_destroy(conf);
        if (!have_bootstrap)
                config_errors_add(w->errs, w->file, w->kafka_line, w->kafka_col,
                                  "missing required key 'kafka.bootstrap.servers'");
        if (!have_group)
                config_errors_add(w->errs, w->file, w->kafka_line, w->kafka_col,
                                  "missing required key 'kafka.group.id'");
}

static void finish_topics(struct walk *w)
{
        struct config *cfg = w->cfg;
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                struct topic_conf *t = &cfg->topics[i];
                char err[512];
                if (!t->name)
                        continue;
                for (size_t j = 0; j < i; j++)
                        if (cfg->topics[j].name && !strcmp(cfg->topics[j].name, t->name))
                                config_errors_add(w->errs, w->file, t->line, t->col,
                                                  "topic '%s' is configured twice", t->name);
                if (!t->dlq_topic || !*t->dlq_topic) {
                        free(t->dlq_topic);
                        if (asprintf(&t->dlq_topic, "%s.dlq", t->name) < 0)
                                t->dlq_topic = NULL;
                }
                if (t->dlq_topic && !strcmp(t->dlq_topic, t->name))
                        config_errors_add(w->errs, w->file, t->line, t->col,
                                          "topic '%s': the dead-letter topic cannot be the topic itself",
                                          t->name);
                if (t->retry_backoff_max_ms < t->retry_backoff_ms)
                        t->retry_backoff_max_ms = t->retry_backoff_ms;
                t->mode = t->mode_name && !strcmp(t->mode_name, "external") ? MODE_EXTERNAL
                                                                           : MODE_TRANSACTIONAL;
                t->on_expired = !t->on_expired_name || !strcmp(t->on_expired_name, "dead-letter")
                                        ? EXPIRED_DEAD_LETTER
                                : !strcmp(t->on_expired_name, "skip") ? EXPIRED_SKIP
                                                                      : EXPIRED_REEXECUTE;
                t->on_mismatch = t->on_mismatch_name && !strcmp(t->on_mismatch_name, "dead-letter")
                                         ? MISMATCH_DEAD_LETTER
                                         : MISMATCH_ABSORB;
                if (t->fingerprint_fields) {
                        size_t k;
                        json_t *v;
                        if (!json_is_array(t->fingerprint_fields) ||
                            json_array_size(t->fingerprint_fields) == 0)
                                config_errors_add(w->errs, w->file, t->line, t->col,
                                                  "topic '%s': fingerprint.fields must be a non-empty list "
                                                  "of JSON paths",
                                                  t->name);
                        else
                                json_array_foreach(t->fingerprint_fields, k, v) {
                                        char tmpl[300];
                                        snprintf(tmpl, sizeof(tmpl), "{json:%s}",
                                                 json_is_string(v) ? json_string_value(v) : "");
                                        if (!json_is_string(v) ||
                                            keyspec_template_check(tmpl, err, sizeof(err)))
                                                config_errors_add(w->errs, w->file, t->line, t->col,
                                                                  "topic '%s': fingerprint.fields[%zu]: %s",
                                                                  t->name, k,
                                                                  json_is_string(v) ? err : "not a path");
                                }
                }
                if (t->retention_name) {
                        for (size_t k = 0; k < cfg->class_cnt; k++)
                                if (!strcmp(cfg->classes[k].name, t->retention_name))
                                        t->retention = &cfg->classes[k];
                        if (!t->retention)
                                config_errors_add(w->errs, w->file, t->line, t->col,
                                                  "topic '%s': retention class '%s' is not defined in "
                                                  "retention_classes",
                                                  t->name, t->retention_name);
                }
                if (t->key_subject) {
                        t->keyspec = keyspec_compile(t->key_subject, t->key_action, t->key_request, err,
                                                     sizeof(err));
                        if (!t->keyspec)
                                config_errors_add(w->errs, w->file, t->line, t->col, "topic '%s': %s",
                                                  t->name, err);
                }
        }
}

/* Sort the messages added since `from` by their position in the file. */
static void errors_sort(struct config_errors *errs, size_t from)
{
        for (size_t i = from + 1; i < errs->cnt; i++) {
                char *m = errs->msgs[i];
                long p = errs->pos[i];
                size_t j = i;
                for (; j > from && errs->pos[j - 1] > p; j--) {
                        errs->msgs[j] = errs->msgs[j - 1];
                        errs->pos[j] = errs->pos[j - 1];
                }
                errs->msgs[j] = m;
                errs->pos[j] = p;
        }
}

/* Bounds checked before the document is built: libyaml's time grows with
 * the square of the nesting depth (100,000 unterminated '[' took a minute),
 * and nothing dedupd reads is nested deeper than a handler's config. */
static int yaml_bounded(const char *name, const char *buf, size_t len, struct config_errors *errs)
{
        yaml_parser_t p;
        yaml_event_t ev;
        int depth = 0, rc = 0;
        size_t events = 0;

        yaml_parser_initialize(&p);
        yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
        for (;;) {
                if (!yaml_parser_parse(&p, &ev))
                        break; /* a syntax error: the full load reports it, with its position */
                int done = ev.type == YAML_STREAM_END_EVENT;
                if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT)
                        depth++;
                else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT)
                        depth--;
                if (depth > CONFIG_MAX_DEPTH || ++events > CONFIG_MAX_NODES) {
                        config_errors_add(errs, name, (int)ev.start_mark.line + 1,
                                          (int)ev.start_mark.column + 1,
                                          depth > CONFIG_MAX_DEPTH
                                                  ? "nested deeper than %d levels: a configuration "
                                                    "never needs that many (refused before parsing further)"
                                                  : "more than %d YAML nodes: a configuration never "
                                                    "needs that many (refused before parsing further)",
                                          depth > CONFIG_MAX_DEPTH ? CONFIG_MAX_DEPTH : CONFIG_MAX_NODES);
                        rc = -1;
                        done = 1;
                }
                yaml_event_delete(&ev);
                if (done)
                        break;
        }
        yaml_parser_delete(&p);
        return rc;
}

static struct config *load(const char *name, const char *buf, size_t len, struct config_errors *errs)
{
        yaml_parser_t parser;
        yaml_document_t doc;
        struct config *cfg;
        size_t errs_before = errs->cnt;

        if (len > CONFIG_MAX_BYTES) {
                config_errors_add(errs, name, 1, 1,
                                  "the file is %zu bytes; a configuration may be at most %d bytes",
                                  len, CONFIG_MAX_BYTES);
                return NULL;
        }
        if (yaml_bounded(name, buf, len, errs))
                return NULL;
        cfg = calloc(1, sizeof(*cfg));
        if (!cfg)
                return NULL;
        struct walk w = {name, &doc, errs, cfg, 0, 1, 1, TREE_MAX_VALUES, 0};
        cfg->path = strdup(name);
        fields_defaults(top_fields, cfg);
        yaml_parser_initialize(&parser);
        yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
        if (!yaml_parser_load(&parser, &doc)) {
                config_errors_add(errs, name, (int)parser.problem_mark.line + 1,
                                  (int)parser.problem_mark.column + 1, "YAML syntax: %s%s%s",
                                  parser.problem ? parser.problem : "error",
                                  parser.context ? " " : "", parser.context ? parser.context : "");
                yaml_parser_delete(&parser);
                config_free(cfg);
                return NULL;
        }
        yaml_parser_delete(&parser);
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        if (!root) {
                config_errors_add(errs, name, 1, 1, "the file is empty");
        } else {
                walk_map(&w, root, top_fields, cfg, "");
                if (w.kafka_seen)
                        check_kafka(&w);
                check_classes(&w);
                finish_topics(&w);
        }
        yaml_document_delete(&doc);
        /* Report in file order, whatever pass found the problem. */
        errors_sort(errs, errs_before);
        if (errs->cnt > errs_before) {
                config_free(cfg);
                return NULL;
        }
        return cfg;
}

struct config *config_load(const char *path, struct config_errors *errs)
{
        struct config *cfg;
        FILE *fp = fopen(path, "rb");
        char *buf;
        size_t len;

        if (!fp) {
                config_errors_add(errs, path, 0, 0, "cannot open: %s", strerror(errno));
                return NULL;
        }
        /* Read at most one byte more than allowed: enough to refuse. */
        buf = malloc(CONFIG_MAX_BYTES + 2);
        if (!buf) {
                fclose(fp);
                config_errors_add(errs, path, 0, 0, "out of memory");
                return NULL;
        }
        len = fread(buf, 1, CONFIG_MAX_BYTES + 1, fp);
        if (ferror(fp)) {
                config_errors_add(errs, path, 0, 0, "cannot read: %s", strerror(errno));
                fclose(fp);
                free(buf);
                return NULL;
        }
        struct stat st;
        if (len > CONFIG_MAX_BYTES && fstat(fileno(fp), &st) == 0 && st.st_size > (off_t)len)
                len = (size_t)st.st_size; /* for the message: load() refuses it without reading */
        fclose(fp);
        buf[len > CONFIG_MAX_BYTES ? CONFIG_MAX_BYTES + 1 : len] = '\0';
        cfg = load(path, buf, len, errs);
        free(buf);
        return cfg;
}

struct config *config_load_string(const char *name, const char *yaml, struct config_errors *errs)
{
        return load(name, yaml, strlen(yaml), errs);
}

void config_free(struct config *cfg)
{
        if (!cfg)
                return;
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                struct topic_conf *t = &cfg->topics[i];
                free(t->name);
                free(t->key_subject);
                free(t->key_action);
                free(t->key_request);
                keyspec_free(t->keyspec);
                free(t->handler_path);
                json_decref(t->handler_config);
                free(t->dlq_topic);
                free(t->mode_name);
                free(t->on_expired_name);
                json_decref(t->fingerprint_fields);
                free(t->on_mismatch_name);
                free(t->reply_header);
                free(t->correlation_header);
                free(t->retention_name);
        }
        free(cfg->topics);
        for (size_t i = 0; i < cfg->class_cnt; i++)
                free(cfg->classes[i].name);
        free(cfg->classes);
        for (size_t i = 0; i < cfg->kafka_cnt; i++) {
                free(cfg->kafka[i].name);
                free(cfg->kafka[i].value);
        }
        free(cfg->kafka);
        free(cfg->path);
        free(cfg->namespace);
        free(cfg->pg_conninfo);
        free(cfg->log_level);
        free(cfg);
}

struct topic_conf *config_topic(const struct config *cfg, const char *name)
{
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                if (!strcmp(cfg->topics[i].name, name))
                        return &cfg->topics[i];
        return NULL;
}

const char *config_tree_get(const json_t *tree, const char *path)
{
        const json_t *v = tree;
        char *copy, *save = NULL;

        if (!tree || !path)
                return NULL;
        copy = strdup(path);
        for (char *tok = strtok_r(copy, ".", &save); tok && v; tok = strtok_r(NULL, ".", &save))
                v = json_is_object(v) ? json_object_get(v, tok) : NULL;
        free(copy);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

static void print_fields(FILE *fp, const struct field *fields, const char *prefix)
{
        for (const struct field *f = fields; f->name; f++) {
                char path[256];
                static const char *const tn[] = {"string", "integer", "section", "map", "tree",
                                                 "list",   "duration", "boolean", "map"};
                snprintf(path, sizeof(path), "%s%s", prefix, f->name);
                fprintf(fp, "  %-48s %-8s %-13s %s\n", path, tn[f->type],
                        f->required ? "required" : (f->def ? f->def : "-"), f->desc);
                if (f->type == F_SECTION || f->type == F_TOPICS || f->type == F_CLASSES) {
                        char sub[256];
                        snprintf(sub, sizeof(sub), "%s%s", path,
                                 f->type == F_TOPICS ? "[]." : f->type == F_CLASSES ? ".NAME." : ".");
                        print_fields(fp, f->sub, sub);
                }
        }
}

void config_print_reference(FILE *fp)
{
        fprintf(fp, "  %-48s %-8s %-13s %s\n", "key", "type", "default", "description");
        print_fields(fp, top_fields, "");
}
