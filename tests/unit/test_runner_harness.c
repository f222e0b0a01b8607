/* test_runner_harness: a database of the program's own, and per test the daemon's store, pipeline and runner on the loopback broker. */
#include "test_runner_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "core/watchdog.h"
#include "ops/health.h"
#include "pg/schema.h"

#ifndef RUN_ENV
#define RUN_ENV ".run/env"
#endif

static char *admin_dsn; /* the server's, from PG_DSN */
static char *test_dsn;  /* this program's database */
static char test_db[64];

/* ---- the database ------------------------------------------------------------- */

/* PG_DSN from the environment, else the value of `export PG_DSN='...'` in .run/env. */
static char *dsn_find(void)
{
        const char *env = getenv("PG_DSN");
        char line[2048];
        FILE *f;
        if (env && *env)
                return strdup(env);
        if (!(f = fopen(RUN_ENV, "r")))
                return NULL;
        char *found = NULL;
        while (!found && fgets(line, sizeof(line), f)) {
                char *v = strstr(line, "export PG_DSN='");
                char *end = v ? strrchr(line, '\'') : NULL;
                if (v == line && end > v + 15)
                        found = strndup(v + 15, (size_t)(end - v - 15));
        }
        fclose(f);
        return found;
}

/* dsn with its dbname replaced by db, as key=value pairs (quoted where needed). */
static char *dsn_with_db(const char *dsn, const char *db)
{
        char *err = NULL, out[4096] = "";
        size_t at = 0;
        PQconninfoOption *opts = PQconninfoParse(dsn, &err), *o;
        if (!opts)
                fail_msg("PG_DSN does not parse: %s", err ? err : "?");
        for (o = opts; o->keyword; o++) {
                const char *v = !strcmp(o->keyword, "dbname") ? db : o->val;
                if (!v || !*v)
                        continue;
                at += (size_t)snprintf(out + at, sizeof(out) - at, "%s%s='", at ? " " : "", o->keyword);
                for (; *v && at + 3 < sizeof(out); v++) {
                        if (*v == '\'' || *v == '\\')
                                out[at++] = '\\';
                        out[at++] = *v;
                }
                at += (size_t)snprintf(out + at, sizeof(out) - at, "'");
        }
        PQconninfoFree(opts);
        return strdup(out);
}

static void notice_quiet(void *arg, const char *message) {}

/* "VERB <db> TAIL" on the server (CREATE DATABASE, DROP DATABASE). */
static void admin_exec(const char *verb, const char *db, const char *tail)
{
        PGconn *c = PQconnectdb(admin_dsn);
        PQsetNoticeProcessor(c, notice_quiet, NULL);
        char *ident = PQescapeIdentifier(c, db, strlen(db));
        char sql[256];
        snprintf(sql, sizeof(sql), "%s %s%s", verb, ident, tail);
        PGresult *r = PQexec(c, sql); /* an identifier: no parameter can hold it */
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
                fprintf(stderr, "%s: %s", sql, PQerrorMessage(c));
        PQclear(r);
        PQfreemem(ident);
        PQfinish(c);
}

/* No server: skipped, unless the services are required (scripts/test). */
static void db_unavailable(const char *why)
{
        if (getenv("DEDUPD_REQUIRE_SERVICES")) {
                fprintf(stderr, "FAIL: PostgreSQL is required (DEDUPD_REQUIRE_SERVICES) and %s\n", why);
                exit(1);
        }
        fprintf(stderr, "SKIP: %s (start it with scripts/services up)\n", why);
        exit(77);
}

static void db_create(void)
{
        PGconn *c;
        if (!(admin_dsn = dsn_find()))
                db_unavailable("no PG_DSN in the environment nor in " RUN_ENV);
        c = PQconnectdb(admin_dsn);
        if (PQstatus(c) != CONNECTION_OK) {
                char why[1024];
                snprintf(why, sizeof(why), "PostgreSQL at PG_DSN is not reachable: %s", PQerrorMessage(c));
                PQfinish(c);
                db_unavailable(why);
        }
        PQfinish(c);
        snprintf(test_db, sizeof(test_db), "dedupd_unit_runner_%ld", (long)getpid());
        admin_exec("DROP DATABASE IF EXISTS", test_db, "");
        admin_exec("CREATE DATABASE", test_db, "");
        test_dsn = dsn_with_db(admin_dsn, test_db);
}

static void db_drop(void)
{
        admin_exec("DROP DATABASE IF EXISTS", test_db, " WITH (FORCE)");
        free(test_dsn);
        free(admin_dsn);
}

int rt_main(const char *group, const struct CMUnitTest *tests, size_t n)
{
        struct unit_list l = {0};
        db_create();
        log_set_level(getenv("RUNNER_TEST_DEBUG") ? LOG_DEBUG : LOG_WARN);
        unit_add_tests(&l, tests, n);
        int failed = unit_run(group, &l);
        db_drop();
        return failed;
}

/* ---- SQL for the test's assertions ----------------------------------------------- */

static PGresult *sql_run(struct rt *t, const char *sql, int nparams, const char *const *params, int tuples)
{
        PGresult *r = PQexecParams(t->db, sql, nparams, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(r) != (tuples ? PGRES_TUPLES_OK : PGRES_COMMAND_OK)) {
                char msg[1024];
                snprintf(msg, sizeof(msg), "%s", PQerrorMessage(t->db));
                PQclear(r);
                fail_msg("%s: %s", sql, msg);
        }
        return r;
}

char *rt_sql(struct rt *t, const char *sql, int nparams, const char *const *params)
{
        PGresult *r = sql_run(t, sql, nparams, params, 1);
        char *v = PQntuples(r) && !PQgetisnull(r, 0, 0) ? strdup(PQgetvalue(r, 0, 0)) : NULL;
        PQclear(r);
        return v;
}

int64_t rt_sql_int(struct rt *t, const char *sql, int nparams, const char *const *params)
{
        char *v = rt_sql(t, sql, nparams, params);
        int64_t n = v ? strtoll(v, NULL, 10) : -1;
        free(v);
        return n;
}

void rt_exec(struct rt *t, const char *sql, int nparams, const char *const *params)
{
        PQclear(sql_run(t, sql, nparams, params, 0));
}

int64_t rt_db_offset(struct rt *t, const char *topic, int32_t partition)
{
        char part[16];
        snprintf(part, sizeof(part), "%d", (int)partition);
        return rt_sql_int(
                t, "SELECT next_offset FROM dedupd.offsets WHERE namespace = $1 AND topic = $2 AND partition = $3", 3,
                (const char *const[]){t->cfg->namespace, topic, part});
}

size_t rt_outstanding(const struct rt *t, const char *topic, int32_t partition)
{
        return loopback_part(t->lb, topic, partition).outstanding;
}

/* ---- scenarios ------------------------------------------------------------------- */

void rt_push(struct rt *t, const char *topic, int32_t partition, const char *ids)
{
        char *list = strdup(ids), *save = NULL, value[256];
        for (char *id = strtok_r(list, ",", &save); id; id = strtok_r(NULL, ",", &save)) {
                snprintf(value, sizeof(value), "{\"id\":\"%s\"}", id);
                loopback_push(t->lb, topic, partition, NULL, value, NULL, 0);
        }
        free(list);
}

void rt_assign(struct rt *t, const char *topic, size_t n)
{
        int32_t parts[n ? n : 1];
        for (size_t i = 0; i < n; i++)
                parts[i] = (int32_t)i;
        loopback_assign(t->lb, topic, parts, n);
}

void rt_want_acked(struct rt *t, const char *topic, int32_t partition, int64_t next_offset)
{
        assert_true(t->want_cnt < sizeof(t->want) / sizeof(t->want[0]));
        t->want[t->want_cnt++] = (struct rt_want){topic, partition, next_offset};
}

int rt_acked_all(struct rt *t)
{
        for (size_t i = 0; i < t->want_cnt; i++) {
                struct loopback_part_state st = loopback_part(t->lb, t->want[i].topic, t->want[i].partition);
                if (st.acked != t->want[i].next_offset || st.outstanding)
                        return 0;
        }
        return 1;
}

char *rt_effects(struct rt *t)
{
        return rt_sql(t, "SELECT coalesce(string_agg(idem_key, ',' ORDER BY idem_key), '') FROM flaky_effects", 0,
                      NULL);
}

char *rt_flaky_topic(const char *name, const char *handler_config, const char *batch, const char *retry)
{
        char buf[2048];
        snprintf(buf, sizeof(buf),
                 "  - name: %s\n"
                 "    key: {subject: \"{json:id}\", action: PAY}\n"
                 "    handler: {path: \"%s\", config: {%s}}\n"
                 "    batch: {%s}\n"
                 "    retry: {%s}\n",
                 name, FLAKY_SO, handler_config, batch, retry);
        return strdup(buf);
}

/* ---- the daemon ------------------------------------------------------------------ */

/* An empty database: whatever the last test left, gone; the schema migrated. */
static void schema_reset(struct rt *t)
{
        rt_exec(t, "DROP SCHEMA IF EXISTS dedupd CASCADE", 0, NULL);
        rt_exec(t, "DROP SCHEMA public CASCADE", 0, NULL);
        rt_exec(t, "CREATE SCHEMA public", 0, NULL);
        if (store_migrate(t->store, t->err, sizeof(t->err)))
                fail_msg("store_migrate: %s", t->err);
}

static struct config *config_make(const char *head_yaml, const char *topics_yaml)
{
        struct config_errors errs = {0};
        size_t sz = strlen(head_yaml) + strlen(topics_yaml) + strlen(test_dsn) + 256;
        char *yaml = malloc(sz);
        snprintf(yaml, sz,
                 "namespace: unit\n"
                 "source: loopback\n"
                 "postgres: {conninfo: \"%s\"}\n"
                 "%s"
                 "topics:\n%s",
                 test_dsn, head_yaml, topics_yaml);
        struct config *cfg = config_load_string("runner-test.yaml", yaml, &errs);
        for (size_t i = 0; i < errs.cnt; i++)
                fprintf(stderr, "%s\n", errs.msgs[i]);
        if (!cfg)
                fail_msg("the test's config does not load:\n%s", yaml);
        config_errors_clear(&errs);
        free(yaml);
        return cfg;
}

/* The broker the config names (source: loopback), opened as dedupd opens
 * any: through its row in the broker table. */
static void broker_open(struct rt *t)
{
        t->broker = broker_of(t->cfg);
        assert_string_equal(t->broker->config->name, "loopback");
        t->run = t->broker->open(t->cfg);
        if (t->broker->probe(t->run, 1000, t->err, sizeof(t->err)) != BROKER_READY ||
            t->broker->sink(t->run, &t->sink, t->err, sizeof(t->err)))
                fail_msg("the loopback broker: %s", t->err);
        t->lb = (struct loopback *)t->run;
}

/* What dedupd's prepare() and run() make, on the loopback. */
static void daemon_build(struct rt *t)
{
        t->store = store_new(t->cfg->pg_conninfo, 60000);
        if (store_connect(t->store, t->err, sizeof(t->err)) != STORE_OK)
                fail_msg("store_connect: %s", t->err);
}

/* One lane on the daemon's connection; with workers, one each on a
 * connection and watchdog of its own (the loop keeps the daemon's). The
 * loopback's sink takes one call at a time itself (no sink_locked). */
static void lanes_add(struct rt *t)
{
        size_t n = (size_t)t->cfg->workers;
        if (n <= 1) {
                pipeline_add_lane(t->pl, t->store, t->wd);
                return;
        }
        assert_true(n <= sizeof(t->workers) / sizeof(t->workers[0]));
        if (pipeline_concurrent(t->pl, 0, t->err, sizeof(t->err)))
                fail_msg("workers: %s", t->err);
        for (size_t i = 0; i < n; i++) {
                struct rt_worker *w = &t->workers[i];
                w->store = store_new(t->cfg->pg_conninfo, 60000);
                if (store_connect(w->store, t->err, sizeof(t->err)) != STORE_OK)
                        fail_msg("worker %zu: store_connect: %s", i + 1, t->err);
                if (!(w->wd = watchdog_start(t->err, sizeof(t->err))))
                        fail_msg("worker %zu: watchdog_start: %s", i + 1, t->err);
                pipeline_add_lane(t->pl, w->store, w->wd);
        }
        t->worker_cnt = n;
}

static void daemon_start(struct rt *t)
{
        if (!(t->pl = pipeline_new(t->cfg, t->store, t->sink, t->err, sizeof(t->err))))
                fail_msg("pipeline_new: %s", t->err);
        if (!(t->wd = watchdog_start(t->err, sizeof(t->err))))
                fail_msg("watchdog_start: %s", t->err);
        lanes_add(t);
        if (!(t->runner = runner_new(t->cfg, t->store, t->pl, t->sink, t->err, sizeof(t->err))))
                fail_msg("runner_new: %s", t->err);
        if (!(t->src = t->broker->source(t->run, runner_events(t->runner), 0, 0, t->err, sizeof(t->err))))
                fail_msg("the loopback's source: %s", t->err);
}

static void daemon_stop(struct rt *t)
{
        runner_free(t->runner);
        watchdog_stop(t->wd);
        pipeline_free(t->pl);
        for (size_t i = 0; i < t->worker_cnt; i++) {
                watchdog_stop(t->workers[i].wd);
                store_free(t->workers[i].store);
        }
        t->worker_cnt = 0;
        store_free(t->store);
        t->runner = NULL;
        t->pl = NULL;
        t->wd = NULL;
        t->store = NULL;
}

struct rt *rt_start(const char *topics_yaml) { return rt_start_with("", topics_yaml); }

struct rt *rt_start_with(const char *head_yaml, const char *topics_yaml)
{
        struct rt *t = calloc(1, sizeof(*t));
        t->cfg = config_make(head_yaml, topics_yaml);
        t->db = PQconnectdb(test_dsn);
        if (PQstatus(t->db) != CONNECTION_OK)
                fail_msg("connecting to %s: %s", test_db, PQerrorMessage(t->db));
        PQsetNoticeProcessor(t->db, notice_quiet, NULL); /* DROP ... CASCADE's list of what it dropped */
        const char *names[t->cfg->topic_cnt ? t->cfg->topic_cnt : 1];
        for (size_t i = 0; i < t->cfg->topic_cnt; i++)
                names[i] = t->cfg->topics[i].name;
        health_init(60000, t->cfg->topic_cnt, names); /* what /readyz would answer */
        daemon_build(t);
        schema_reset(t);
        broker_open(t);
        daemon_start(t);
        return t;
}

void rt_restart(struct rt *t)
{
        daemon_stop(t);
        daemon_build(t);
        daemon_start(t);
}

void rt_free(struct rt *t)
{
        daemon_stop(t);
        t->broker->close(t->run);
        health_free();
        PQfinish(t->db);
        config_free(t->cfg);
        free(t);
}

/* At every poll: the scenario's step, and the deadline. */
static void on_poll(struct loopback *lb, void *opaque)
{
        struct rt *t = opaque;
        if (t->until(t))
                t->stop = 1;
        else if (log_now_ms() > t->deadline_ms)
                t->timed_out = t->stop = 1;
}

int rt_run(struct rt *t, int (*until)(struct rt *t), int timeout_ms)
{
        t->until = until;
        t->stop = 0;
        t->timed_out = 0;
        t->deadline_ms = log_now_ms() + timeout_ms;
        loopback_on_poll(t->lb, on_poll, t);
        int rc = runner_run(t->runner, t->src, &t->stop, t->err, sizeof(t->err));
        if (t->timed_out)
                fail_msg("the scenario did not reach its end (step %d) within %d ms", t->step, timeout_ms);
        return rc;
}
