/* plugin: what a broker registers — its configuration, its daemon side, its operator side (one struct, its folder's broker.c). */
#ifndef DEDUPD_SOURCE_PLUGIN_H
#define DEDUPD_SOURCE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/config_impl.h"
#include "core/source.h"
#include "pg/store.h"
#include "source/replay.h"

/*
 * A broker registers itself the way Fluent Bit's plug-ins do: one struct
 * naming its configuration rows and checks, what the daemon needs of it
 * (start-up, a sink, a source) and what the operator's tool needs of it
 * (a live check, replay, lag). The table (brokers.c) lists them; the mains
 * look the configured one up once (broker_of) and call through it: no code
 * outside a broker's folder names the broker.
 */

/** One start-up attempt, as the daemon's wait loop reads it. */
enum broker_probe {
        BROKER_READY = 0, /* reached, and what it must hold is there */
        BROKER_WAIT,      /* not reached: the loop waits and tries again until the startup deadline */
        BROKER_INVALID,   /* reached, but the configuration does not fit it: exit 2 (err says why, "" when said) */
        BROKER_REFUSED,   /* refused in a way no wait mends (a wrong CA or password): exit 1 */
};

/** What dedupctl check found on the broker. */
enum broker_check {
        BROKER_CHECK_OK = 0,
        BROKER_CHECK_INVALID,     /* reached, and something is wrong there */
        BROKER_CHECK_UNREACHABLE, /* not reached */
};

/** Where a broker's check speaks to the operator. */
struct broker_report {
        FILE *out, *err;
        const char *path; /* the config file, the start of every problem line */
        int warnings;     /* counted by the check */
        int timeout_ms;   /* the longest one answer may take */
};

/** How long dedupctl check waits for a broker's answer. */
#define BROKER_CHECK_TIMEOUT_MS 5000

/** A finding of lag, one line each (dedupctl verify --expect-caught-up). */
typedef void (*broker_finding_fn)(void *opaque, const char *line);

/** A broker's side of one running daemon: its connection, its publisher. */
struct broker_run;

struct broker {
        const struct config_broker *config; /* name, title, rows, checks across keys (its settings.c) */
        const char *awaited;                /* what start-up says it waits for: "the broker", "NATS" */
        /** Its libraries' versions for --version ("librdkafka 2.0.2"). */
        const char *(*versions)(char *buf, size_t bufsz);
        /** Acknowledged messages are gone for good (no replay from a position):
         *  a database failover is safe only with synchronous replication. */
        int acks_final;

        /* The daemon. */
        struct broker_run *(*open)(const struct config *cfg);
        /** Reach the broker and check what the configuration needs there. */
        enum broker_probe (*probe)(struct broker_run *r, int timeout_ms, char *err, size_t errsz);
        /** Where the protocol publishes (dead letters, the outbox); -1 and why. */
        int (*sink)(struct broker_run *r, struct sink *out, char *err, size_t errsz);
        /** The consumer, joining no group before the runner polls it; NULL and why. */
        struct source *(*source)(struct broker_run *r, struct source_events ev, int64_t deadline_ms,
                                 int startup_timeout_ms, char *err, size_t errsz);
        /** After the source is destroyed. */
        void (*close)(struct broker_run *r);

        /* The operator's tool. */
        enum broker_check (*check)(const struct config *cfg, struct broker_report *rep);
        /** NULL: the broker cannot replay (no_replay says what to do instead). */
        enum replay_rc (*replay)(const struct config *cfg, const struct replay_opts *o, char *err, size_t errsz);
        const char *no_replay;
        /** Prints the broker's lag table on out; with expect_caught_up, what is not caught up goes to
         *  finding. -1 with err when the broker or the database did not answer. */
        int (*lag)(struct store *s, const struct config *cfg, FILE *out, int expect_caught_up,
                   broker_finding_fn finding, void *opaque, char *err, size_t errsz);
};

#endif
