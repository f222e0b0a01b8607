/* config_reload: SIGHUP — the file read again, the settings marked reloadable applied in place, the others reported as waiting for a restart. */
#include "base/config_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The two configs compared. */
struct diff_pair {
        struct config *live;
        const struct config *next;
};

/* What changed, as one report: "log_level info -> debug; ..." and the rest. */
struct diff {
        char *applied, *restart;
        size_t asz, rsz, alen, rlen;
        const struct diff_pair *configs;
};

static void note(char *buf, size_t sz, size_t *len, const char *fmt, const char *path, const char *from, const char *to)
{
        if (*len >= sz)
                return;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        *len += (size_t)snprintf(buf + *len, sz - *len, fmt, *len ? "; " : "", path, from, to);
#pragma GCC diagnostic pop
}

/* A scalar slot as text, for comparing and for the report. */
static void slot_text(const struct field *f, const void *slot, char *out, size_t outsz)
{
        switch (f->type) {
        case F_STR: snprintf(out, outsz, "%s", *(char *const *)slot ? *(char *const *)slot : ""); break;
        case F_DURATION: snprintf(out, outsz, "%" PRId64 "ms", *(const int64_t *)slot); break;
        case F_BOOL: snprintf(out, outsz, "%s", *(const int *)slot ? "true" : "false"); break;
        case F_ENUM:
                snprintf(out, outsz, "%d", *(const int *)slot);
                for (const struct enum_name *e = f->names; e->name; e++)
                        if (e->value == *(const int *)slot)
                                snprintf(out, outsz, "%s", e->name);
                break;
        default: snprintf(out, outsz, "%d", *(const int *)slot); break;
        }
}

static size_t slot_size(const struct field *f)
{
        return f->type == F_STR ? sizeof(char *) : f->type == F_DURATION ? sizeof(int64_t) : sizeof(int);
}

static void walk(const struct field *rows, char *live, const char *next, const char *prefix, struct diff *d);

/* One row: applied in place when it reloads (scalars only), else reported. */
static void compare(const struct field *f, char *live, const char *next, const char *path, struct diff *d)
{
        char a[256], b[256];
        if (f->type == F_SECTION) {
                char sub[200];
                snprintf(sub, sizeof(sub), "%s.", path);
                walk(f->sub, live, next, sub, d);
                return;
        }
        if (f->type == F_TREE) {
                const json_t *x = *(json_t **)(live + f->off), *y = *(json_t *const *)(next + f->off);
                if ((x || y) && !(x && y && json_equal(x, y)))
                        note(d->restart, d->rsz, &d->rlen, "%s%s%s%s", path, "", "");
                return;
        }
        slot_text(f, live + f->off, a, sizeof(a));
        slot_text(f, next + f->off, b, sizeof(b));
        if (!strcmp(a, b))
                return;
        if (!f->reload) {
                note(d->restart, d->rsz, &d->rlen, "%s%s%s%s", path, "", "");
                return;
        }
        memcpy(live + f->off, next + f->off, slot_size(f));
        note(d->applied, d->asz, &d->alen, "%s%s %s -> %s", path, f->secret ? "(secret)" : a,
             f->secret ? "(secret)" : b);
}

static int same_kvs(const struct config_kvs *a, const struct config_kvs *b)
{
        if (a->n != b->n)
                return 0;
        for (size_t i = 0; i < a->n; i++)
                if (strcmp(a->v[i].name, b->v[i].name) || strcmp(a->v[i].value, b->v[i].value))
                        return 0;
        return 1;
}

/* A broker's own row, on each config's settings of that broker. */
static void compare_own(const struct field *f, const struct diff_pair *p, const char *prefix, struct diff *d)
{
        const struct field one[] = {*f->sub, {.name = NULL}};
        walk(one, p->live->broker_settings[f->off], p->next->broker_settings[f->off], prefix, d);
}

static void walk(const struct field *rows, char *live, const char *next, const char *prefix, struct diff *d)
{
        for (const struct field *f = rows; f->name; f++) {
                char path[200];
                snprintf(path, sizeof(path), "%s%s", prefix, f->name);
                if (f->type == F_OWN)
                        compare_own(f, d->configs, prefix, d);
                else if (f->type == F_KV) {
                        if (!same_kvs((const void *)(live + f->off), (const void *)(next + f->off)))
                                note(d->restart, d->rsz, &d->rlen, "%s%s%s%s", path, "", "");
                } else if (f->type != F_TOPICS && f->type != F_CLASSES) /* compared as wholes below */
                        compare(f, live, next, path, d);
        }
}

static int same_classes(const struct config *a, const struct config *b)
{
        if (a->class_cnt != b->class_cnt)
                return 0;
        for (size_t i = 0; i < a->class_cnt; i++) {
                const struct retention_class *x = &a->classes[i], *y = &b->classes[i];
                if (strcmp(x->name, y->name) || x->keep_ms != y->keep_ms || x->max_retry_ms != y->max_retry_ms ||
                    x->clock_skew_ms != y->clock_skew_ms || x->replay_window_ms != y->replay_window_ms ||
                    x->response_ttl_ms != y->response_ttl_ms ||
                    x->allow_shorter_than_topic != y->allow_shorter_than_topic)
                        return 0;
        }
        return 1;
}

/* The topics, one by one when the list is the same list; else a restart. */
static void compare_topics(struct config *live, const struct config *next, struct diff *d)
{
        const struct field *rows = NULL;
        for (const struct field *f = config_rows(); f->name; f++)
                if (f->type == F_TOPICS)
                        rows = f->sub;
        int same = live->topic_cnt == next->topic_cnt;
        for (size_t i = 0; same && i < live->topic_cnt; i++)
                same = !strcmp(live->topics[i].name, next->topics[i].name);
        if (!same) {
                note(d->restart, d->rsz, &d->rlen, "%s%s%s%s", "topics (added, removed or reordered)", "", "");
                return;
        }
        for (size_t i = 0; i < live->topic_cnt; i++) {
                char prefix[200];
                snprintf(prefix, sizeof(prefix), "topics[%s].", live->topics[i].name);
                walk(rows, (char *)&live->topics[i], (const char *)&next->topics[i], prefix, d);
        }
}

int config_reload(struct config *live, const char *path, struct config_errors *errs, char *applied, size_t asz,
                  char *restart, size_t rsz)
{
        struct config *next = config_load(path, errs);
        if (!next)
                return -1;
        struct diff_pair p = {live, next};
        struct diff d = {applied, restart, asz, rsz, 0, 0, &p};
        applied[0] = restart[0] = '\0';
        walk(config_rows(), (char *)live, (const char *)next, "", &d);
        if (!same_classes(live, next))
                note(restart, rsz, &d.rlen, "%s%s%s%s", "retention_classes", "", "");
        compare_topics(live, next, &d);
        config_free(next);
        return 0;
}
