/* registry: metric families and their labelled series, rendered in the Prometheus text exposition format. */
#include "ops/registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

struct series {
        char *values[METRIC_MAX_LABELS];
        double value;                         /* counter, gauge */
        double counts[METRIC_MAX_BUCKETS + 1]; /* histogram: per bucket, the last is +Inf */
        double sum;
        double count;
};

struct metric {
        const struct metric_def *def;
        size_t nlabels;
        struct series *series;
        size_t n, cap;
        pthread_mutex_t *lock; /* the registry's */
};

struct registry {
        pthread_mutex_t lock;
        struct metric **families;
        size_t n;
};

struct registry *registry_new(void)
{
        struct registry *r = xcalloc(1, sizeof(*r));
        pthread_mutex_init(&r->lock, NULL);
        return r;
}

static void series_free(struct series *s, size_t nlabels)
{
        for (size_t i = 0; i < nlabels; i++)
                free(s->values[i]);
}

void registry_free(struct registry *r)
{
        if (!r)
                return;
        for (size_t f = 0; f < r->n; f++) {
                struct metric *m = r->families[f];
                for (size_t i = 0; i < m->n; i++)
                        series_free(&m->series[i], m->nlabels);
                free(m->series);
                free(m);
        }
        free(r->families);
        pthread_mutex_destroy(&r->lock);
        free(r);
}

struct metric *registry_add(struct registry *r, const struct metric_def *def)
{
        struct metric *m = xcalloc(1, sizeof(*m));
        m->def = def;
        m->lock = &r->lock;
        while (m->nlabels < METRIC_MAX_LABELS && def->labels[m->nlabels])
                m->nlabels++;
        pthread_mutex_lock(&r->lock);
        r->families = xrealloc(r->families, (r->n + 1) * sizeof(*r->families));
        r->families[r->n++] = m;
        pthread_mutex_unlock(&r->lock);
        return m;
}

/* The series for these label values, created at zero when new (lock held). */
static struct series *find(struct metric *m, const char *const *values, int create)
{
        for (size_t i = 0; i < m->n; i++) {
                size_t l = 0;
                while (l < m->nlabels && !strcmp(m->series[i].values[l], values[l] ? values[l] : ""))
                        l++;
                if (l == m->nlabels)
                        return &m->series[i];
        }
        if (!create)
                return NULL;
        if (m->n == m->cap) {
                m->cap = m->cap ? m->cap * 2 : 8;
                m->series = xrealloc(m->series, m->cap * sizeof(*m->series));
        }
        struct series *s = &m->series[m->n++];
        memset(s, 0, sizeof(*s));
        for (size_t l = 0; l < m->nlabels; l++)
                s->values[l] = xstrdup(values[l] ? values[l] : "");
        return s;
}

void metric_inc(struct metric *m, const char *const *values, double by)
{
        pthread_mutex_lock(m->lock);
        find(m, values, 1)->value += by;
        pthread_mutex_unlock(m->lock);
}

void metric_set(struct metric *m, const char *const *values, double v)
{
        pthread_mutex_lock(m->lock);
        find(m, values, 1)->value = v;
        pthread_mutex_unlock(m->lock);
}

void metric_observe(struct metric *m, const char *const *values, double v)
{
        pthread_mutex_lock(m->lock);
        struct series *s = find(m, values, 1);
        size_t b = 0;
        while (b < m->def->nbuckets && v > m->def->buckets[b])
                b++;
        s->counts[b]++;
        s->sum += v;
        s->count++;
        pthread_mutex_unlock(m->lock);
}

void metric_forget(struct metric *m, const char *const *values)
{
        pthread_mutex_lock(m->lock);
        struct series *s = find(m, values, 0);
        if (s) {
                series_free(s, m->nlabels);
                *s = m->series[--m->n];
        }
        pthread_mutex_unlock(m->lock);
}

/* ---- rendering ----------------------------------------------------------- */

struct out {
        char *p;
        size_t len, cap;
};

static void put(struct out *o, const char *s, size_t n)
{
        if (o->len + n + 1 > o->cap) {
                o->cap = (o->len + n + 1) * 2;
                o->p = xrealloc(o->p, o->cap);
        }
        memcpy(o->p + o->len, s, n);
        o->len += n;
        o->p[o->len] = '\0';
}

static void puts_(struct out *o, const char *s) { put(o, s, strlen(s)); }

/* Label values escape \, " and newline; help text escapes \ and newline. */
static void put_escaped(struct out *o, const char *s, int quotes)
{
        for (; *s; s++) {
                if (*s == '\\')
                        puts_(o, "\\\\");
                else if (*s == '\n')
                        puts_(o, "\\n");
                else if (*s == '"' && quotes)
                        puts_(o, "\\\"");
                else
                        put(o, s, 1);
        }
}

/* The shortest decimal that reads back as v (0.1, not 0.10000000000000001). */
static void format_number(char *num, size_t sz, double v)
{
        for (int digits = 15; digits <= 17; digits++) {
                snprintf(num, sz, "%.*g", digits, v);
                if (strtod(num, NULL) == v)
                        return;
        }
}

static void put_number(struct out *o, double v)
{
        char num[40];
        format_number(num, sizeof(num), v);
        puts_(o, num);
}

/* name{a="x",b="y"[,le="0.5"]} value */
static void put_sample(struct out *o, const struct metric *m, const struct series *s, const char *suffix,
                       const char *le, double v)
{
        puts_(o, m->def->name);
        puts_(o, suffix);
        if (m->nlabels || le) {
                puts_(o, "{");
                for (size_t l = 0; l < m->nlabels; l++) {
                        puts_(o, l ? ",": "");
                        puts_(o, m->def->labels[l]);
                        puts_(o, "=\"");
                        put_escaped(o, s->values[l], 1);
                        puts_(o, "\"");
                }
                if (le) {
                        puts_(o, m->nlabels ? ",le=\"" : "le=\"");
                        puts_(o, le);
                        puts_(o, "\"");
                }
                puts_(o, "}");
        }
        puts_(o, " ");
        put_number(o, v);
        puts_(o, "\n");
}

static void put_histogram(struct out *o, const struct metric *m, const struct series *s)
{
        double cumulative = 0;
        char le[40];
        for (size_t b = 0; b <= m->def->nbuckets; b++) {
                cumulative += s->counts[b];
                if (b < m->def->nbuckets)
                        format_number(le, sizeof(le), m->def->buckets[b]);
                put_sample(o, m, s, "_bucket", b < m->def->nbuckets ? le : "+Inf", cumulative);
        }
        put_sample(o, m, s, "_sum", NULL, s->sum);
        put_sample(o, m, s, "_count", NULL, s->count);
}

static void put_family(struct out *o, const struct metric *m)
{
        static const char *const types[] = {"counter", "gauge", "histogram"};
        puts_(o, "# HELP ");
        puts_(o, m->def->name);
        puts_(o, " ");
        put_escaped(o, m->def->help, 0);
        puts_(o, "\n# TYPE ");
        puts_(o, m->def->name);
        puts_(o, " ");
        puts_(o, types[m->def->type]);
        puts_(o, "\n");
        for (size_t i = 0; i < m->n; i++) {
                if (m->def->type == METRIC_HISTOGRAM)
                        put_histogram(o, m, &m->series[i]);
                else
                        put_sample(o, m, &m->series[i], "", NULL, m->series[i].value);
        }
}

char *registry_render(struct registry *r)
{
        struct out o = {0};
        puts_(&o, "");
        pthread_mutex_lock(&r->lock);
        for (size_t f = 0; f < r->n; f++)
                put_family(&o, r->families[f]);
        pthread_mutex_unlock(&r->lock);
        return o.p;
}
