/* config: the YAML configuration read with libyaml into the declarative table — reading, bounds, free and dump all follow the rows. */
#include "base/config.h"

#include "base/mem.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <yaml.h>

#include "base/config_impl.h"
#include "base/keyspec.h"
#include "base/redact.h"

/* F_ENUM rows store into enum members as int. */
_Static_assert(sizeof(enum topic_mode) == sizeof(int), "enum size");
_Static_assert(sizeof(enum expired_policy) == sizeof(int), "enum size");
_Static_assert(sizeof(enum mismatch_policy) == sizeof(int), "enum size");

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

/* ---- errors ------------------------------------------------------------------ */

void config_errors_add(struct config_errors *errs, const char *file, int line, int col, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        char *hidden = redact_text(msg); /* a value echoed back may be a secret read from a file */
        char *full = xasprintf("%s:%d:%d: %s", file, line, col, hidden ? hidden : msg);
        free(hidden);
        errs->msgs = xrealloc(errs->msgs, (errs->cnt + 1) * sizeof(*errs->msgs));
        errs->pos = xrealloc(errs->pos, (errs->cnt + 1) * sizeof(*errs->pos));
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

/* ---- the walk ----------------------------------------------------------------- */

struct walk {
        const char *file;
        yaml_document_t *doc;
        struct config_errors *errs;
        struct config *cfg;
        char **refused; /* paths written whose value was refused: not "missing" too */
        size_t refused_cnt;
        size_t tree_budget; /* values left for handler config subtrees */
        int tree_err;       /* reported a too deep/large subtree already */
};

#define TREE_MAX_DEPTH 64
#define TREE_MAX_VALUES 100000
#define CONFIG_MAX_BYTES (1024 * 1024) /* a configuration file */
#define CONFIG_MAX_DEPTH 32            /* YAML nesting */
#define CONFIG_MAX_NODES 100000        /* YAML events (scalars, starts and ends) */

#define NODE_LINE(n) ((int)(n)->start_mark.line + 1)
#define NODE_COL(n) ((int)(n)->start_mark.column + 1)

static const yaml_node_t *node(struct walk *w, int idx) { return yaml_document_get_node(w->doc, idx); }

static void werr(struct walk *w, const yaml_node_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void werr(struct walk *w, const yaml_node_t *n, const char *fmt, ...)
{
        char msg[900];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        config_errors_add(w->errs, w->file, n ? NODE_LINE(n) : 1, n ? NODE_COL(n) : 1, "%s", msg);
}

static const char *scalar(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

/* A YAML null: a plain scalar that is empty ("key:" with nothing after it), ~ or null, or one
 * tagged !!null. libyaml resolves no tags, so every such value would otherwise read as a string. */
static int is_null(const yaml_node_t *n)
{
        const char *v;
        if (n->type != YAML_SCALAR_NODE)
                return 0;
        if (n->tag && !strcmp((const char *)n->tag, YAML_NULL_TAG))
                return 1;
        if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return 0; /* "" and 'null' are strings */
        v = scalar(n);
        return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

int config_field_empty_ok(const struct field *f) { return f->empty_ok || (f->def && !*f->def); }

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

static json_t *tree_to_json(struct walk *w, const yaml_node_t *n, const char *path, int depth)
{
        json_t *j = NULL;
        /* Aliases can make a tree recursive (&a [*a]) or explode in size. */
        if (depth > TREE_MAX_DEPTH || w->tree_budget == 0) {
                if (!w->tree_err)
                        werr(w, n,
                             "'%s' is nested deeper than %d levels or holds more than %d values "
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
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top && !w->tree_err; p++) {
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
static void walk_kv(struct walk *w, const struct field *f, const yaml_node_t *n, struct config_kvs *kv,
                    const char *path);

/* ---- reading one value per row ------------------------------------------------ */

static void fields_defaults(const struct field *fields, void *base);
static void settings_new(struct config *cfg);
static void fields_defaults_in(const struct config *cfg, const struct field *fields, void *base);

const char *config_enum_list(const struct enum_name *names, char *buf, size_t sz)
{
        buf[0] = '\0';
        for (const struct enum_name *e = names; e->name; e++)
                if (!e->hidden)
                        snprintf(buf + strlen(buf), sz - strlen(buf), "%s%s", buf[0] ? ", " : "", e->name);
        return buf;
}

static int enum_value(const struct enum_name *names, const char *v, int *out)
{
        for (const struct enum_name *e = names; e->name; e++)
                if (!strcmp(e->name, v)) {
                        *out = e->value;
                        return 0;
                }
        return -1;
}

static const char *enum_text(const struct enum_name *names, int value)
{
        for (const struct enum_name *e = names; e->name; e++)
                if (e->value == value)
                        return e->name;
        return "?";
}

static void refused_add(struct walk *w, const char *path)
{
        w->refused = xrealloc(w->refused, (w->refused_cnt + 1) * sizeof(*w->refused));
        w->refused[w->refused_cnt++] = xstrdup(path);
}

int config_checks_refused(const struct config_checks *c, const char *path)
{
        for (size_t i = 0; i < c->refused_cnt; i++)
                if (!strcmp(c->refused[i], path))
                        return 1;
        return 0;
}

/* " for the default (500)" when the row has a default worth naming, else "". */
static const char *default_hint(const struct field *f, char *buf, size_t bufsz)
{
        if (!f->def || !*f->def)
                return "";
        snprintf(buf, bufsz, " for the default (%s)", f->def);
        return buf;
}

/* A key written with nothing (or null) after it: refused, whatever the row's type, before any
 * value reaches a broker or the database. */
static void no_value(struct walk *w, const struct field *f, const yaml_node_t *v, const char *path)
{
        char d[128];
        if (f->required)
                werr(w, v, "'%s' is required but has no value (nothing or null after the key)", path);
        else
                werr(w, v, "'%s' has no value (nothing or null after the key): give one, or remove the key%s%s", path,
                     default_hint(f, d, sizeof(d)),
                     f->type == F_STR && config_field_empty_ok(f) ? "; \"\" (quoted) is the empty value" : "");
}

/* "" where a string is required, or where it means nothing; the raw text tells a ${VAR} that
 * came out empty from an empty value written as such. */
static int empty_refused(struct walk *w, const struct field *f, const yaml_node_t *v, const char *s, const char *path)
{
        char d[128];
        if (*s || config_field_empty_ok(f))
                return 0;
        werr(w, v, "'%s' is empty%s: %s%s", path, strstr(scalar(v), "${") ? " (after ${...} substitution)" : "",
             f->required ? "a value is required" : "give a value, or remove the key",
             f->required ? "" : default_hint(f, d, sizeof(d)));
        return 1;
}

static void read_str(struct walk *w, const struct field *f, const yaml_node_t *v, void *slot, const char *path)
{
        char *s = scalar_value(w, v, path);
        char err[512];
        if (!s)
                return;
        if (empty_refused(w, f, v, s, path)) {
                free(s);
                return;
        }
        if (f->check && f->check(s, err, sizeof(err))) {
                werr(w, v, "'%s': %s", path, err);
                free(s);
                return;
        }
        free(*(char **)slot);
        *(char **)slot = s;
}

static void read_int(struct walk *w, const struct field *f, const yaml_node_t *v, void *slot, const char *path)
{
        char *s = scalar_value(w, v, path);
        char err[256];
        if (s && parse_int(s, f->min, f->max, (int *)slot, err, sizeof(err)))
                werr(w, v, "'%s': %s", path, err);
        free(s);
}

static void read_duration(struct walk *w, const struct field *f, const yaml_node_t *v, void *slot, const char *path)
{
        char *s = scalar_value(w, v, path), c[CLIP_SZ], step[32];
        if (!s)
                return;
        int64_t ms = config_parse_duration(s);
        if (ms < 0)
                werr(w, v, "'%s': '%s' is not a duration (e.g. 250ms, 30s, 5m, 48h, 7d)", path, clip(s, c));
        else if (ms < f->min)
                werr(w, v, "'%s': must be at least %ld ms", path, f->min);
        else if (f->step && ms % f->step)
                werr(w, v, "'%s': must be a whole number of %s, not '%s'", path,
                     config_format_duration(f->step, step, sizeof(step)), clip(s, c));
        else
                *(int64_t *)slot = ms;
        free(s);
}

static void read_bool(struct walk *w, const yaml_node_t *v, void *slot, const char *path)
{
        char *s = scalar_value(w, v, path), c[CLIP_SZ];
        if (!s)
                return;
        if (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on"))
                *(int *)slot = 1;
        else if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off"))
                *(int *)slot = 0;
        else
                werr(w, v, "'%s': '%s' is not true or false", path, clip(s, c));
        free(s);
}

static void read_enum(struct walk *w, const struct field *f, const yaml_node_t *v, void *slot, const char *path)
{
        char *s = scalar_value(w, v, path), c[CLIP_SZ], list[256];
        if (s && enum_value(f->names, s, (int *)slot))
                werr(w, v, "'%s': '%s' is not one of %s", path, clip(s, c),
                     config_enum_list(f->names, list, sizeof(list)));
        free(s);
}

static void walk_map(struct walk *w, const yaml_node_t *map, const struct field *fields, void *base,
                     const char *prefix);

static void read_section(struct walk *w, const struct field *f, const yaml_node_t *v, void *base, const char *path)
{
        char sub[256];
        snprintf(sub, sizeof(sub), "%s.", path);
        walk_map(w, v, f->sub, base, sub);
}

/* One key's value into its row's slot, as its type reads it. */
static void read_typed(struct walk *w, const struct field *f, const yaml_node_t *v, void *base, const char *path)
{
        void *slot = (char *)base + f->off;
        switch (f->type) {
        case F_STR: read_str(w, f, v, slot, path); break;
        case F_INT: read_int(w, f, v, slot, path); break;
        case F_DURATION: read_duration(w, f, v, slot, path); break;
        case F_BOOL: read_bool(w, v, slot, path); break;
        case F_ENUM: read_enum(w, f, v, slot, path); break;
        case F_SECTION: read_section(w, f, v, base, path); break;
        case F_TREE:
                json_decref(*(json_t **)slot);
                *(json_t **)slot = tree_to_json(w, v, path, 0);
                break;
        case F_KV: walk_kv(w, f, v, slot, path); break;
        case F_TOPICS: walk_topics(w, v); break;
        case F_CLASSES: walk_classes(w, v, f->sub); break;
        case F_OWN: read_typed(w, f->sub, v, w->cfg->broker_settings[f->off], path); break;
        }
}

/* One key's value: a null is refused whatever the type; a refused value is remembered, so that
 * the checks across keys do not call it missing as well. */
static void read_value(struct walk *w, const struct field *f, const yaml_node_t *v, void *base, const char *path)
{
        size_t errs_before = w->errs->cnt;
        if (is_null(v))
                no_value(w, f, v, path);
        else
                read_typed(w, f, v, base, path);
        if (w->errs->cnt > errs_before)
                refused_add(w, path);
}

/* The row of key k, or NULL after reporting it unknown. */
static const struct field *row_of(struct walk *w, const struct field *fields, const yaml_node_t *k, const char *path)
{
        char known[512] = "";
        for (const struct field *f = fields; f->name; f++)
                if (!strcmp(f->name, scalar(k)))
                        return f;
        for (const struct field *g = fields; g->name; g++)
                snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s", g->name, g[1].name ? ", " : "");
        werr(w, k, "unknown key '%s' (expected one of: %s)", path, known);
        return NULL;
}

static void require(struct walk *w, const yaml_node_t *map, const struct field *fields, const int *seen,
                    const char *prefix)
{
        size_t i = 0;
        for (const struct field *f = fields; f->name; f++, i++) {
                char sub[256];
                if ((seen && seen[i]) || !f->required)
                        continue;
                if (f->type != F_SECTION) {
                        werr(w, map, "missing required key '%s%s'", prefix, f->name);
                        continue;
                }
                snprintf(sub, sizeof(sub), "%s%s.", prefix, f->name);
                require(w, map, f->sub, NULL, sub);
        }
}

/* A mapping against its rows: every key known, once, every required one there. */
static void walk_map(struct walk *w, const yaml_node_t *map, const struct field *fields, void *base, const char *prefix)
{
        size_t nf = 0;
        char path[256];
        for (const struct field *f = fields; f->name; f++)
                nf++;
        int seen[nf ? nf : 1];
        memset(seen, 0, sizeof(seen));
        if (map->type != YAML_MAPPING_NODE) {
                /* prefix is "topics[0].key.": the mapping's own name without the dot */
                int len = *prefix ? (int)strlen(prefix) - 1 : 9;
                const char *name = *prefix ? prefix : "top level";
                if (is_null(map))
                        werr(w, map,
                             "'%.*s' has no value (nothing or null after it): its settings go under it, "
                             "as a mapping",
                             len, name);
                else
                        werr(w, map, "'%.*s' must be a mapping, not %s", len, name, node_kind(map));
                return;
        }
        for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
                const yaml_node_t *k = node(w, p->key), *v = node(w, p->value);
                if (k->type != YAML_SCALAR_NODE) {
                        werr(w, k, "keys must be scalars");
                        continue;
                }
                snprintf(path, sizeof(path), "%s%s", prefix, scalar(k));
                const struct field *f = row_of(w, fields, k, path);
                if (!f)
                        continue;
                if (seen[f - fields]++) {
                        werr(w, k, "duplicate key '%s'", path);
                        continue;
                }
                read_value(w, f, v, base, path);
        }
        require(w, map, fields, seen, prefix);
}
static long kv_index(const struct config_kvs *kv, const char *name)
{
        for (size_t i = 0; i < kv->n; i++)
                if (!strcmp(kv->v[i].name, name))
                        return (long)i;
        return -1;
}

const char *config_kvs_get(const struct config_kvs *kv, const char *name)
{
        long i = kv_index(kv, name);
        return i >= 0 ? kv->v[i].value : NULL;
}

static int kv_required(const struct field *f, const char *name)
{
        for (const char *const *k = f->keys_required; k && *k; k++)
                if (!strcmp(*k, name))
                        return 1;
        return 0;
}

/* What an entry of a verbatim map is to the checks on values: a string, passed on verbatim even
 * when ""; the entries its row requires may not be null. */
static const struct field kv_value = {.name = "*", .type = F_STR, .empty_ok = 1};
static const struct field kv_needed = {.name = "*", .type = F_STR, .required = 1};

/* One entry of a verbatim map: stored as it is, a secret one redacted from every log line. */
static void kv_entry(struct walk *w, const struct field *f, const yaml_node_t *k, const yaml_node_t *v,
                     struct config_kvs *kv, const char *path)
{
        if (kv_index(kv, scalar(k)) >= 0) {
                werr(w, k, "duplicate key '%s'", path);
                return;
        }
        if (is_null(v)) {
                no_value(w, kv_required(f, scalar(k)) ? &kv_needed : &kv_value, v, path);
                refused_add(w, path);
                return;
        }
        char *val = scalar_value(w, v, path);
        if (!val) {
                refused_add(w, path);
                return;
        }
        if (f->secret_key && f->secret_key(scalar(k)))
                redact_add(val); /* however it got here: never in a log line */
        kv->v = xrealloc(kv->v, (kv->n + 1) * sizeof(*kv->v));
        kv->v[kv->n++] = (struct config_kv){xstrdup(scalar(k)), val, NODE_LINE(v), NODE_COL(v)};
}

static void walk_kv(struct walk *w, const struct field *f, const yaml_node_t *n, struct config_kvs *kv,
                    const char *path)
{
        kv->line = NODE_LINE(n);
        kv->col = NODE_COL(n);
        if (n->type != YAML_MAPPING_NODE) {
                werr(w, n, "'%s' must be a mapping of names to values, not %s", path, node_kind(n));
                return;
        }
        kv->seen = 1;
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
                const yaml_node_t *k = node(w, p->key), *v = node(w, p->value);
                char sub[256];
                if (k->type != YAML_SCALAR_NODE) {
                        werr(w, k, "%s: keys must be scalars", path);
                        continue;
                }
                snprintf(sub, sizeof(sub), "%s.%s", path, scalar(k));
                kv_entry(w, f, k, v, kv, sub);
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
                struct topic_conf *nt = xrealloc(cfg->topics, (cfg->topic_cnt + 1) * sizeof(*nt));
                char prefix[64];
                cfg->topics = nt;
                struct topic_conf *t = &cfg->topics[cfg->topic_cnt];
                memset(t, 0, sizeof(*t));
                t->line = NODE_LINE(tn);
                t->col = NODE_COL(tn);
                fields_defaults(config_topic_fields, t);
                snprintf(prefix, sizeof(prefix), "topics[%zu].", cfg->topic_cnt);
                cfg->topic_cnt++;
                walk_map(w, tn, config_topic_fields, t, prefix);
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
                struct retention_class *nc = xrealloc(cfg->classes, (cfg->class_cnt + 1) * sizeof(*nc));
                cfg->classes = nc;
                struct retention_class *c = &cfg->classes[cfg->class_cnt++];
                memset(c, 0, sizeof(*c));
                c->name = xstrdup(scalar(k));
                c->line = NODE_LINE(k);
                c->col = NODE_COL(k);
                fields_defaults(fields, c);
                snprintf(prefix, sizeof(prefix), "retention_classes.%s.", scalar(k));
                walk_map(w, v, fields, c, prefix);
        }
}

/* Design section 8: keep > max retry span + clock skew + manual replay window. */
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
                        config_errors_add(errs, name, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1,
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

/* Where a top-level key is (its value), or the document's start. */
static int key_position(struct walk *w, const yaml_node_t *root, const char *key, int *line, int *col)
{
        *line = NODE_LINE(root);
        *col = NODE_COL(root);
        if (root->type != YAML_MAPPING_NODE)
                return 0;
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
                const yaml_node_t *k = node(w, p->key);
                if (k->type == YAML_SCALAR_NODE && !strcmp(scalar(k), key)) {
                        *line = NODE_LINE(k);
                        *col = NODE_COL(k);
                        return 1;
                }
        }
        return 0;
}

/* Each broker's key: whether it is there, and where. */
static void broker_keys(struct walk *w, const yaml_node_t *root, int *given, int *line, int *col)
{
        const struct config_broker *b;
        for (size_t i = 0; (b = config_broker_at(i)) && i < CONFIG_BROKERS_MAX; i++)
                given[i] = key_position(w, root, b->name, &line[i], &col[i]);
}

/* The checks across keys: the consumed broker's first. */
static void check_document(struct walk *w, const yaml_node_t *root)
{
        struct config *cfg = w->cfg;
        int given[CONFIG_BROKERS_MAX] = {0}, line[CONFIG_BROKERS_MAX], col[CONFIG_BROKERS_MAX];
        struct config_checks c = {.file = w->file,
                                  .errs = w->errs,
                                  .cfg = cfg,
                                  .refused = (const char *const *)w->refused,
                                  .refused_cnt = w->refused_cnt};
        key_position(w, root, "source", &c.source_line, &c.source_col);
        broker_keys(w, root, given, line, col);
        cfg->broker = config_broker_at((size_t)cfg->source);
        c.given = given[cfg->source];
        c.line = line[cfg->source];
        c.col = col[cfg->source];
        if (root->type == YAML_MAPPING_NODE) {
                config_check_source(&c, given, line, col);
                if (cfg->broker->check)
                        cfg->broker->check(&c, cfg->broker_settings[cfg->source]);
        }
        config_check_classes(&c);
        config_finish_topics(&c);
}

/* Every row, then the checks across keys. */
static void walk_document(const char *name, yaml_document_t *doc, struct config_errors *errs, struct config *cfg)
{
        struct walk w = {.file = name, .doc = doc, .errs = errs, .cfg = cfg, .tree_budget = TREE_MAX_VALUES};
        yaml_node_t *root = yaml_document_get_root_node(doc);
        if (!root) {
                config_errors_add(errs, name, 1, 1, "the file is empty");
                return;
        }
        walk_map(&w, root, config_rows(), cfg, "");
        check_document(&w, root);
        for (size_t i = 0; i < w.refused_cnt; i++)
                free(w.refused[i]);
        free(w.refused);
}

static void syntax_error(const yaml_parser_t *p, const char *name, struct config_errors *errs)
{
        config_errors_add(errs, name, (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1,
                          "YAML syntax: %s%s%s", p->problem ? p->problem : "error", p->context ? " " : "",
                          p->context ? p->context : "");
}

/* What follows the first document would be ignored: refused instead. */
static void refuse_second_document(yaml_parser_t *p, const char *name, struct config_errors *errs)
{
        yaml_document_t next;
        if (!yaml_parser_load(p, &next)) {
                syntax_error(p, name, errs);
                return;
        }
        if (yaml_document_get_root_node(&next))
                config_errors_add(errs, name, (int)next.start_mark.line + 1, (int)next.start_mark.column + 1,
                                  "a second YAML document starts here: a configuration is one document");
        yaml_document_delete(&next);
}

static struct config *load(const char *name, const char *buf, size_t len, struct config_errors *errs)
{
        yaml_parser_t parser;
        yaml_document_t doc;
        struct config *cfg;
        size_t errs_before = errs->cnt;

        if (len > CONFIG_MAX_BYTES) {
                config_errors_add(errs, name, 1, 1, "the file is %zu bytes; a configuration may be at most %d bytes",
                                  len, CONFIG_MAX_BYTES);
                return NULL;
        }
        if (yaml_bounded(name, buf, len, errs))
                return NULL;
        cfg = xcalloc(1, sizeof(*cfg));
        cfg->path = xstrdup(name);
        settings_new(cfg);
        fields_defaults_in(cfg, config_rows(), cfg);
        yaml_parser_initialize(&parser);
        yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
        if (!yaml_parser_load(&parser, &doc)) {
                syntax_error(&parser, name, errs);
                yaml_parser_delete(&parser);
                config_free(cfg);
                return NULL;
        }
        refuse_second_document(&parser, name, errs);
        yaml_parser_delete(&parser);
        walk_document(name, &doc, errs, cfg);
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
        buf = xmalloc(CONFIG_MAX_BYTES + 2);
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
        copy = xstrdup(path);
        for (char *tok = strtok_r(copy, ".", &save); tok && v; tok = strtok_r(NULL, ".", &save))
                v = json_is_object(v) ? json_object_get(v, tok) : NULL;
        free(copy);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

/* ---- defaults, free and dump: driven by the same rows ---------------------------- */

static void fields_defaults(const struct field *fields, void *base);

/* Each broker's settings, zeroed (its defaults come with the others). */
static void settings_new(struct config *cfg)
{
        const struct config_broker *b;
        for (size_t i = 0; (b = config_broker_at(i)) && i < CONFIG_BROKERS_MAX; i++)
                cfg->broker_settings[i] = xcalloc(1, b->settings_size ? b->settings_size : 1);
}

/* A broker's F_OWN row: its own row, on its own settings. */
static void *own_base(const struct config *cfg, const struct field *f) { return cfg->broker_settings[f->off]; }

static void fields_defaults_in(const struct config *cfg, const struct field *fields, void *base)
{
        for (const struct field *f = fields; f->name; f++)
                if (f->type == F_OWN)
                        fields_defaults((const struct field[]){*f->sub, {.name = NULL}}, own_base(cfg, f));
        fields_defaults(fields, base);
}

static void fields_defaults(const struct field *fields, void *base)
{
        for (const struct field *f = fields; f->name; f++) {
                void *slot = (char *)base + f->off;
                if (f->type == F_SECTION)
                        fields_defaults(f->sub, base);
                if (!f->def)
                        continue;
                switch (f->type) {
                case F_INT: *(int *)slot = atoi(f->def); break;
                case F_STR: *(char **)slot = xstrdup(f->def); break;
                case F_DURATION: *(int64_t *)slot = config_parse_duration(f->def); break;
                case F_BOOL: *(int *)slot = !strcmp(f->def, "true"); break;
                case F_ENUM: enum_value(f->names, f->def, (int *)slot); break;
                default: break;
                }
        }
}

static void kvs_free(struct config_kvs *kv)
{
        for (size_t i = 0; i < kv->n; i++) {
                free(kv->v[i].name);
                free(kv->v[i].value);
        }
        free(kv->v);
}

static void fields_free(const struct field *fields, void *base)
{
        for (const struct field *f = fields; f->name; f++) {
                void *slot = (char *)base + f->off;
                if (f->type == F_KV)
                        kvs_free(slot);
                else if (f->type == F_STR)
                        free(*(char **)slot);
                else if (f->type == F_TREE)
                        json_decref(*(json_t **)slot);
                else if (f->type == F_SECTION)
                        fields_free(f->sub, base);
        }
}

const struct retention_class *config_class(const struct config *cfg, const char *name)
{
        for (size_t k = 0; name && k < cfg->class_cnt; k++)
                if (cfg->classes[k].name && !strcmp(cfg->classes[k].name, name))
                        return &cfg->classes[k];
        return NULL;
}

void config_free(struct config *cfg)
{
        if (!cfg)
                return;
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                fields_free(config_topic_fields, &cfg->topics[i]);
                keyspec_free(cfg->topics[i].keyspec);
                keyspec_free(cfg->topics[i].prev_keyspec);
                keytmpl_free(cfg->topics[i].parallel_keytmpl);
                keytmpl_free(cfg->topics[i].tenant_keytmpl);
                keytmpl_free(cfg->topics[i].bucket_keytmpl);
                free(cfg->topics[i].parallel_layout);
        }
        free(cfg->topics);
        for (size_t i = 0; i < cfg->class_cnt; i++) {
                fields_free(config_class_fields, &cfg->classes[i]);
                free(cfg->classes[i].name);
        }
        free(cfg->classes);
        for (const struct field *f = config_rows(); f->name; f++)
                if (f->type == F_OWN && own_base(cfg, f))
                        fields_free((const struct field[]){*f->sub, {.name = NULL}}, own_base(cfg, f));
        for (size_t i = 0; i < CONFIG_BROKERS_MAX; i++)
                free(cfg->broker_settings[i]);
        fields_free(config_top_fields, cfg);
        free(cfg->path);
        free(cfg);
}

/* A value as config_dump shows it: a secret row, or one that holds a
 * secret read from a file (a handler's password in its config), is not. */
static const char *shown(int secret, const char *v) { return secret || redact_contains(v) ? "(set, not shown)" : v; }

static void dump_fields(FILE *fp, const struct config *cfg, const struct field *fields, const void *base,
                        const char *prefix);

/* A verbatim map's entries, secret ones not shown. */
static void dump_kvs(FILE *fp, const struct field *f, const struct config_kvs *kv, const char *path)
{
        for (size_t i = 0; i < kv->n; i++)
                fprintf(fp, "%s.%s: %s\n", path, kv->v[i].name,
                        shown(f->secret_key && f->secret_key(kv->v[i].name), kv->v[i].value));
}

/* The consumed broker's own rows only: another broker's settings are unused. */
static void dump_own(FILE *fp, const struct config *cfg, const struct field *f, const char *prefix)
{
        if ((int)f->off == cfg->source)
                dump_fields(fp, cfg, (const struct field[]){*f->sub, {.name = NULL}}, own_base(cfg, f), prefix);
}

static void dump_fields(FILE *fp, const struct config *cfg, const struct field *fields, const void *base,
                        const char *prefix)
{
        for (const struct field *f = fields; f->name; f++) {
                const void *slot = (const char *)base + f->off;
                char path[256], d[64];
                char *tree;
                snprintf(path, sizeof(path), "%s%s", prefix, f->name);
                switch (f->type) {
                case F_STR:
                        if (*(char *const *)slot)
                                fprintf(fp, "%s: %s\n", path, shown(f->secret, *(char *const *)slot));
                        break;
                case F_INT: fprintf(fp, "%s: %d\n", path, *(const int *)slot); break;
                case F_DURATION:
                        fprintf(fp, "%s: %s\n", path, config_format_duration(*(const int64_t *)slot, d, sizeof(d)));
                        break;
                case F_BOOL: fprintf(fp, "%s: %s\n", path, *(const int *)slot ? "true" : "false"); break;
                case F_ENUM: fprintf(fp, "%s: %s\n", path, enum_text(f->names, *(const int *)slot)); break;
                case F_SECTION: {
                        char sub[256];
                        snprintf(sub, sizeof(sub), "%s.", path);
                        dump_fields(fp, cfg, f->sub, base, sub);
                        break;
                }
                case F_TREE:
                        if (!*(json_t *const *)slot)
                                break;
                        tree = json_dumps(*(json_t *const *)slot, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
                        fprintf(fp, "%s: %s\n", path, tree ? shown(0, tree) : "?");
                        free(tree);
                        break;
                case F_KV: dump_kvs(fp, f, slot, path); break;
                case F_OWN: dump_own(fp, cfg, f, prefix); break;
                default: break; /* the lists: config_dump walks them */
                }
        }
}

void config_dump(const struct config *cfg, FILE *fp)
{
        dump_fields(fp, cfg, config_rows(), cfg, "");
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                char prefix[64];
                snprintf(prefix, sizeof(prefix), "topics[%zu].", i);
                dump_fields(fp, cfg, config_topic_fields, &cfg->topics[i], prefix);
        }
        for (size_t i = 0; i < cfg->class_cnt; i++) {
                char prefix[160];
                snprintf(prefix, sizeof(prefix), "retention_classes.%s.", cfg->classes[i].name);
                dump_fields(fp, cfg, config_class_fields, &cfg->classes[i], prefix);
        }
}

void *config_broker_settings(const struct config *cfg) { return cfg->broker_settings[cfg->source]; }

void *config_settings_of(const struct config *cfg, const struct config_broker *b)
{
        for (size_t i = 0; i < CONFIG_BROKERS_MAX; i++)
                if (config_broker_at(i) == b)
                        return cfg->broker_settings[i];
        return NULL;
}

const char *config_source_name(const struct config *cfg) { return cfg->broker ? cfg->broker->name : "?"; }
