/* registry: metric families and their labelled series, rendered in the Prometheus text exposition format. */
#ifndef DEDUPD_OPS_REGISTRY_H
#define DEDUPD_OPS_REGISTRY_H

#include <stddef.h>

enum metric_type { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM };

#define METRIC_MAX_LABELS 4
#define METRIC_MAX_BUCKETS 16

/** A family: its name, help, type, label names and (histograms) upper bounds. */
struct metric_def {
        const char *name; /* base unit and _total per Prometheus' conventions */
        const char *help;
        enum metric_type type;
        const char *labels[METRIC_MAX_LABELS]; /* NULL-terminated when fewer */
        double buckets[METRIC_MAX_BUCKETS];    /* ascending; +Inf is implied */
        size_t nbuckets;
};

struct registry;
struct metric;

struct registry *registry_new(void);
void registry_free(struct registry *r);

/** A family in r; def must outlive the registry (a static table). */
struct metric *registry_add(struct registry *r, const struct metric_def *def);

/* Updates, safe from any thread; label values in the order of def->labels. */
void metric_inc(struct metric *m, const char *const *values, double by);    /* counter, gauge */
void metric_set(struct metric *m, const char *const *values, double v);     /* gauge */
void metric_observe(struct metric *m, const char *const *values, double v); /* histogram */
/** Drop one series (a partition no longer assigned). */
void metric_forget(struct metric *m, const char *const *values);

/** The exposition text of every family (a new string; free it). */
char *registry_render(struct registry *r);

#endif
