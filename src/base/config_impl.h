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
        F_KV,       /* struct config_kvs: a flat map passed through verbatim (kafka:) */
        F_TOPICS,   /* the list of topic mappings */
        F_CLASSES,  /* retention_classes: a mapping of name -> class */
        F_OWN,      /* a broker's own top-level row (sub): its offsets are into that broker's settings
                     * (off: the broker's place in the table) */
};

/** A string an F_ENUM row accepts, and the value it stands for. */
struct enum_name {
        const char *name;
        int value;
        int hidden; /* accepted, but not listed (a test build's loopback broker) */
};

/* librdkafka's config rows are the model: a row names only what it sets. */
struct field {
        const char *name;
        enum ftype type;
        size_t off;      /* where the value lives in its struct */
        const char *def; /* the default, as text; NULL: none */
        int required;
        long min, max;                                        /* F_INT bounds; F_DURATION's least value */
        long step;                                            /* F_DURATION: a whole number of these (0: any) */
        const struct field *sub;                              /* F_SECTION, F_TOPICS, F_CLASSES: the rows inside */
        const struct enum_name *names;                        /* F_ENUM: NULL-terminated */
        int (*check)(const char *v, char *err, size_t errsz); /* F_STR: more than a type */
        int empty_ok;                        /* F_STR: "" is a value with a meaning (the desc says which);
                                         * implied by a default of "". Otherwise "" is refused. */
        int secret;                          /* never printed (config_dump) */
        int (*secret_key)(const char *name); /* F_KV: 1 when that entry's value is a secret */
        const char *const *keys_required;    /* F_KV: entries that may not be null (NULL-terminated) */
        int reload;                          /* SIGHUP applies a new value without a restart */
        int importance;                      /* 1: set it or know why not; 3: rarely touched; 0: between
                                         * (the reference lists the ones that matter first) */
        const char *desc;
};

/** The names an F_ENUM row lists ("a, b, c"; hidden ones left out) into buf. */
const char *config_enum_list(const struct enum_name *names, char *buf, size_t sz);

/** Whether "" is a value of string row f: the row says so, or it is the row's default. */
int config_field_empty_ok(const struct field *f);

/** The top-level rows dedupd itself has; topics and classes are their sub
 *  tables. The brokers' rows join them where `source` is (config_rows). */
extern const struct field config_top_fields[];
extern const struct field config_topic_fields[];
extern const struct field config_class_fields[];
/** Every top-level row: dedupd's and each broker's (as F_OWN rows). */
const struct field *config_rows(void);

/** The checks across keys, after every row was read (config_check.c). Each
 *  problem goes to errs located at what it is about. */
struct config_checks {
        const char *file;
        struct config_errors *errs;
        struct config *cfg;
        const char *const *refused; /* paths written whose value was refused, reported where it is */
        size_t refused_cnt;
        int source_line, source_col; /* `source:` (or the document's start) */
        int given;                   /* the consumed broker's own key is there */
        int line, col;               /* where that key is (or the document's start) */
};

/** What the configuration knows of a broker: its rows and its checks. A
 *  broker's folder defines it (its `config` in struct broker, source/broker.h). */
struct config_broker {
        const char *name;         /* source: NAME, and the key of its own settings */
        const char *title;        /* in messages: "Kafka", "NATS JetStream", "RabbitMQ" */
        const struct field *rows; /* its top-level rows, offsets into its settings */
        size_t settings_size;
        int amqp_properties; /* a key may read {amqp:NAME} */
        int test_only;       /* registered in test builds only: not listed in the reference */
        /** The checks across keys when it is the one consumed (settings: its own). */
        void (*check)(struct config_checks *c, void *settings);
};

/** The i-th broker of the broker table, NULL past the last. Defined with that
 *  table (src/source/brokers.c): the configuration knows brokers only so. */
const struct config_broker *config_broker_at(size_t i);

/** 1 when path ("nats.stream") was written but its value refused (null, empty, an unset ${VAR}):
 *  reported where it is already, so not "missing" as well. */
int config_checks_refused(const struct config_checks *c, const char *path);
/** Each broker's key given though another broker is consumed. */
void config_check_source(struct config_checks *c, const int *given, const int *line, const int *col);
void config_check_classes(struct config_checks *c);
/** keys: its bucket a whole number of days. */
void config_finish_topics(struct config_checks *c);

#endif
