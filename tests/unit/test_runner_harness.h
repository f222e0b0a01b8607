/* test_runner_harness: the real runner, pipeline and store on a database of the test program's own, fed by the loopback broker — what the runner tests share. */
#ifndef DEDUPD_TEST_RUNNER_HARNESS_H
#define DEDUPD_TEST_RUNNER_HARNESS_H

#include <signal.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "unit.h"

#include "base/config.h"
#include "base/log.h"
#include "core/pipeline.h"
#include "core/runner.h"
#include "pg/store.h"
#include "source/brokers.h"
#include "source/loopback/loopback.h"

/*
 * The database: PG_DSN from the environment, else from the checkout's
 * .run/env (scripts/services up). The program creates a database of its own
 * there and drops it at the end; each test starts on an empty schema
 * migrated by store_migrate. No PostgreSQL: the program is skipped (exit 77)
 * unless DEDUPD_REQUIRE_SERVICES is set, when it fails.
 */

/** One test's daemon: what dedupd's prepare() and run() build, on the loopback. */
struct rt {
        struct config *cfg;
        struct store *store;
        struct pipeline *pl;
        struct watchdog *wd;
        struct rt_worker {
                struct store *store;
                struct watchdog *wd;
        } workers[4]; /* workers > 1: each lane's own connection and watchdog */
        size_t worker_cnt;
        struct runner *runner;
        const struct broker *broker; /* source: loopback, looked up in the broker table as dedupd does */
        struct broker_run *run;      /* its side of this test's daemon */
        struct loopback *lb;         /* the same, as the test fills and reads it */
        struct sink sink;
        struct source *src;
        PGconn *db; /* the test's own connection, for what it asserts */
        volatile sig_atomic_t stop;
        int (*until)(struct rt *t); /* checked at every poll: 1 stops the runner */
        int64_t deadline_ms;
        int timed_out;
        int step; /* a scenario's progress, for its until() */
        struct rt_want {
                const char *topic;
                int32_t partition;
                int64_t next_offset;
        } want[8]; /* rt_acked_all: what must be acknowledged */
        size_t want_cnt;
        int64_t since_ms; /* when the scenario's step began */
        char err[512];
};

/** The YAML of the config's topics: list; the harness adds namespace
 *  "unit", the database and a kafka: section (unused). */
struct rt *rt_start(const char *topics_yaml);
/** Same, with top-level settings of the test's own (head_yaml: whole lines, "workers: 2\n"). */
struct rt *rt_start_with(const char *head_yaml, const char *topics_yaml);
/** Run the runner until until(t) says 1 (at a poll) or timeout_ms passed
 *  (the test fails). Returns what runner_run returned. A test may run again
 *  after rt_restart. */
int rt_run(struct rt *t, int (*until)(struct rt *t), int timeout_ms);
/** A daemon restart: a new store, pipeline and runner, the same broker and
 *  database (the broker's consumer rejoins with nothing assigned). */
void rt_restart(struct rt *t);
void rt_free(struct rt *t);

/** The first column of the first row of sql with its parameters (NULL
 *  pointers are SQL NULL) as text, malloc'd; NULL: no row or NULL. The test
 *  fails on an SQL error. */
char *rt_sql(struct rt *t, const char *sql, int nparams, const char *const *params);
/** Same, as a number (-1: no row or NULL). */
int64_t rt_sql_int(struct rt *t, const char *sql, int nparams, const char *const *params);
/** A statement whose result is not needed (fails the test on an error). */
void rt_exec(struct rt *t, const char *sql, int nparams, const char *const *params);

/** dedupd.offsets' next_offset of topic/partition (-1: no row). */
int64_t rt_db_offset(struct rt *t, const char *topic, int32_t partition);
/** Messages of topic/partition the runner holds (handed over, not given back). */
size_t rt_outstanding(const struct rt *t, const char *topic, int32_t partition);

/** Queue {"id":"ID"} on topic/partition for each ID of the comma-separated ids. */
void rt_push(struct rt *t, const char *topic, int32_t partition, const char *ids);
/** Assign partitions 0 .. n-1 of topic (at the next poll). */
void rt_assign(struct rt *t, const char *topic, size_t n);
/** rt_acked_all waits for topic/partition to be acknowledged up to next_offset. */
void rt_want_acked(struct rt *t, const char *topic, int32_t partition, int64_t next_offset);
/** An until(): every rt_want_acked reached, and nothing outstanding. */
int rt_acked_all(struct rt *t);
/** The flaky handler's effects: its keys, sorted, comma-separated ("" when none); malloc'd. */
char *rt_effects(struct rt *t);
/** A topics: entry for the flaky handler (tests/fixtures/handlers/flaky.c):
 *  its key is {json:id}/PAY; handler_config, batch and retry are the insides
 *  of YAML flow maps ("" : defaults). malloc'd. */
char *rt_flaky_topic(const char *name, const char *handler_config, const char *batch, const char *retry);

/** main() of a runner test program: the database made, the tests run, the database dropped. */
int rt_main(const char *group, const struct CMUnitTest *tests, size_t n);

/** Where the handlers are (compile definitions from CMake). */
#ifndef FLAKY_SO
#error FLAKY_SO: the path of the flaky test handler
#endif
#ifndef TRANSFER_SO
#error TRANSFER_SO: the path of the transfer handler
#endif

#endif
