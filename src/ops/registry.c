/* registry: metric families and their labelled series, rendered in the Prometheus text exposition format. */
#include "ops/registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/strbuf.h"

struct series {
        char *values[METRIC_MAX_LABELS];
        double value;                          /* counter, gauge */
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

/* Label values escape \, " and newline; help text escapes \ and newline. */
static void put_escaped(struct strbuf *o, const char *s, int quotes)
{
        for (; *s; s++) {
                if (*s == '\\')
                        strbuf_adds(o, "\\\\");
                else if (*s == '\n')
                        strbuf_adds(o, "\\n");
                else if (*s == '"' && quotes)
                        strbuf_adds(o, "\\\"");
                else
                        strbuf_add(o, s, 1);
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

static void put_number(struct strbuf *o, double v)
{
        char num[40];
        format_number(num, sizeof(num), v);
        strbuf_adds(o, num);
}

/* name{a="x",b="y"[,le="0.5"]} value */
static void put_sample(struct strbuf *o, const struct metric *m, const struct series *s, const char *suffix,
                       const char *le, double v)
{
        strbuf_adds(o, m->def->name);
        strbuf_adds(o, suffix);
        if (m->nlabels || le) {
                strbuf_adds(o, "{");
                for (size_t l = 0; l < m->nlabels; l++) {
                        strbuf_adds(o, l ? "," : "");
                        strbuf_adds(o, m->def->labels[l]);
                        strbuf_adds(o, "=\"");
                        put_escaped(o, s->values[l], 1);
                        strbuf_adds(o, "\"");
                }
                if (le) {
                        strbuf_adds(o, m->nlabels ? ",le=\"" : "le=\"");
                        strbuf_adds(o, le);
                        strbuf_adds(o, "\"");
                }
                strbuf_adds(o, "}");
        }
        strbuf_adds(o, " ");
        put_number(o, v);
        strbuf_adds(o, "\n");
}

static void put_histogram(struct strbuf *o, const struct metric *m, const struct series *s)
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

static void put_family(struct strbuf *o, const struct metric *m)
{
        static const char *const types[] = {"counter", "gauge", "histogram"};
        strbuf_adds(o, "# HELP ");
        strbuf_adds(o, m->def->name);
        strbuf_adds(o, " ");
        put_escaped(o, m->def->help, 0);
        strbuf_adds(o, "\n# TYPE ");
        strbuf_adds(o, m->def->name);
        strbuf_adds(o, " ");
        strbuf_adds(o, types[m->def->type]);
        strbuf_adds(o, "\n");
        for (size_t i = 0; i < m->n; i++) {
                if (m->def->type == METRIC_HISTOGRAM)
                        put_histogram(o, m, &m->series[i]);
                else
                        put_sample(o, m, &m->series[i], "", NULL, m->series[i].value);
        }
}

char *registry_render(struct registry *r)
{
        struct strbuf o = {0};
        strbuf_adds(&o, "");
        pthread_mutex_lock(&r->lock);
        for (size_t f = 0; f < r->n; f++)
                put_family(&o, r->families[f]);
        pthread_mutex_unlock(&r->lock);
        return o.p;
}
