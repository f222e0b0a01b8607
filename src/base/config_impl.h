/* config_impl: inside the config — the shape of a row of the declarative table (config_table.c) and the checks across keys (config_check.c). */
#ifndef DEDUPD_BASE_CONFIG_IMPL_H
#define DEDUPD_BASE_CONFIG_IMPL_H

#include <stddef.h>

#include "base/config.h"

enum ftype {
        F_STR,      /* char * */
        F_INT,      /* int, within [min, max] */
        F_DURATION, /* int64_t milliseconds: "30s", "48h", "7d", or plain ms; at least min */
        F_BOOL,     /* int: true/false (yes/no, on/off) */
        F_ENUM,     /* int: one of names[], validated and decoded by the row */
        F_SECTION,  /* a nested mapping whose fields live in the same struct */
        F_TREE,     /* json_t *: a subtree handed over as JSON (scalars as strings) */
        F_KV,       /* kafka: a flat map passed through verbatim */
        F_TOPICS,   /* the list of topic mappings */
        F_CLASSES,  /* retention_classes: a mapping of name -> class */
};

/** A string an F_ENUM row accepts, and the value it stands for. */
struct enum_name {
        const char *name;
        int value;
};

/* librdkafka's config rows are the model: a row names only what it sets. */
struct field {
        const char *name;
        enum ftype type;
        size_t off;                     /* where the value lives in its struct */
        const char *def;                /* the default, as text; NULL: none */
        int required;
        long min, max;                  /* F_INT bounds; F_DURATION's least value */
        const struct field *sub;        /* F_SECTION, F_TOPICS, F_CLASSES: the rows inside */
        const struct enum_name *names;  /* F_ENUM: NULL-terminated */
        int (*check)(const char *v, char *err, size_t errsz); /* F_STR: more than a type */
        int empty_ok;                   /* F_STR: "" is a value with a meaning (the desc says which);
                                         * implied by a default of "". Otherwise "" is refused. */
        int secret;                     /* never printed (config_dump) */
        int reload;                     /* SIGHUP applies a new value without a restart */
        const char *desc;
};

/** Whether "" is a value of string row f: the row says so, or it is the row's default. */
int config_field_empty_ok(const struct field *f);

/** The top-level rows; topics and classes are their sub tables. */
extern const struct field config_top_fields[];
extern const struct field config_topic_fields[];
extern const struct field config_class_fields[];

/** The checks across keys, after every row was read (config_check.c). Each
 *  problem goes to errs located at what it is about. */
struct config_checks {
        const char *file;
        struct config_errors *errs;
        struct config *cfg;
        int kafka_seen;
        int kafka_line, kafka_col; /* where `kafka:` entries start, for "missing" errors */
        const char *const *refused;  /* paths written whose value was refused, reported where it is */
        size_t refused_cnt;
        int source_line, source_col; /* `source:` (or the document's start) */
        int nats_line, nats_col;     /* `nats:` (or the document's start) */
        int kafka_given;             /* a `kafka:` key is there (a mapping or not) */
        int nats_given;              /* a `nats:` key is there */
        int rmq_line, rmq_col;       /* `rabbitmq:` (or the document's start) */
        int rmq_given;               /* a `rabbitmq:` key is there */
};
/** 1 when path ("nats.stream") was written but its value refused (null, empty, an unset ${VAR}):
 *  reported where it is already, so not "missing" as well. */
int config_checks_refused(const struct config_checks *c, const char *path);
/** What the chosen source needs, and what it leaves unused (source:, kafka:, nats:). */
void config_check_source(struct config_checks *c);
void config_check_kafka(struct config_checks *c);
void config_check_classes(struct config_checks *c);
void config_finish_topics(struct config_checks *c);

#endif
