/* test_host_exec: the SDK's calls as a handler sees them — exec's rows and how it classifies a failure, ensure_schema, set_evidence — on the real PostgreSQL of PG_DSN, in a database of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/host.h"
#include "pg/schema.h"
#include "pg/store.h"
#include "unit.h"

static struct store *db;
static char err[1024];
static struct dedupd_ctx ctx;
static struct dedupd_init_ctx ictx;

/* A message's context, inside a fresh transaction; an init context beside it. */
static void fresh(void)
{
        host_ctx_release(&ctx.head);
        host_ctx_reset(&ctx);
        store_rollback(db);
        ctx = (struct dedupd_ctx){.head = {&host_api, db, NULL}, .idem_key = "9527/PAY", .log_prefix = "handler:test"};
        ictx = (struct dedupd_init_ctx){.head = {&host_api, db, NULL},
                                        .log_prefix = "handler:test",
                                        .ns = "unit",
                                        .topic = "payments",
                                        .handler = "test"};
        if (store_exec(db, "BEGIN", err, sizeof(err)))
                fail_msg("BEGIN: %s", err);
}

static void the_host_is_reached_from_every_context(void **state)
{
        (void)state;
        fresh();
        assert_ptr_equal(DEDUPD_HOST(&ctx), &host_api);
        assert_ptr_equal(DEDUPD_HOST(&ictx), &host_api);
}

static void exec_returns_rows_owned_by_the_host(void **state)
{
        (void)state;
        struct dedupd_rows *r = NULL;
        const char *p[2] = {"7", NULL};
        fresh();
        assert_int_equal(host_api.exec(&ctx, "SELECT $1::int + g, $2::text FROM generate_series(1, 3) g", 2, p, &r),
                         DEDUPD_EXEC_OK);
        assert_int_equal(host_api.rows(r), 3);
        assert_string_equal(host_api.value(r, 2, 0), "10");
        assert_null(host_api.value(r, 0, 1)); /* SQL NULL */
        assert_null(host_api.value(r, 3, 0)); /* no such row */
        assert_null(host_api.value(r, 0, 2)); /* no such column */
        assert_null(host_api.constraint(r));
        assert_int_equal(host_api.exec(&ctx, "CREATE TEMP TABLE t (v int CHECK (v >= 0), u int UNIQUE)", 0, NULL, NULL),
                         DEDUPD_EXEC_OK);
        assert_int_equal(host_api.exec(&ctx, "INSERT INTO t SELECT g, g FROM generate_series(1, 4) g", 0, NULL, &r),
                         DEDUPD_EXEC_OK);
        assert_int_equal(host_api.rows(r), 4); /* no RETURNING: the rows it inserted */
        assert_non_null(ctx.head.rows);
        host_ctx_release(&ctx.head);
        assert_null(ctx.head.rows);
        assert_int_equal(host_api.rows(NULL), 0);
}

/* A failure, told by its SQLSTATE, as the handler returns it. */
static const struct exec_case {
        const char *name, *sql;
        int want;
        const char *constraint, *response;
} exec_cases[] = {
        {"exec: a CHECK violated is a rejection naming it", "INSERT INTO t VALUES (-1, 1)", DEDUPD_EXEC_REJECT,
         "t_v_check", "rejected: constraint t_v_check"},
        {"exec: a UNIQUE violated is a rejection naming it", "INSERT INTO t VALUES (1, 1), (2, 1)", DEDUPD_EXEC_REJECT,
         "t_u_key", "rejected: constraint t_u_key"},
        {"exec: a serialization failure is transient",
         "DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '40001'; END $$", DEDUPD_EXEC_RETRY, NULL, NULL},
        {"exec: a deadlock is transient", "DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '40P01'; END $$",
         DEDUPD_EXEC_RETRY, NULL, NULL},
        {"exec: a syntax error is fatal", "SELEC 1", DEDUPD_EXEC_FATAL, NULL, NULL},
        {"exec: a missing table is fatal", "SELECT * FROM no_such_table", DEDUPD_EXEC_FATAL, NULL, NULL},
        {"exec: a value the column does not take is fatal", "SELECT 'x'::int", DEDUPD_EXEC_FATAL, NULL, NULL},
};

static void exec_classifies_a_failure(void **state)
{
        const struct exec_case *c = *state;
        struct dedupd_rows *r = (struct dedupd_rows *)&r; /* anything but NULL: exec sets it */
        fresh();
        assert_int_equal(host_api.exec(&ctx, "CREATE TEMP TABLE t (v int CHECK (v >= 0), u int UNIQUE)", 0, NULL, NULL),
                         DEDUPD_EXEC_OK);
        assert_int_equal(host_api.exec(&ctx, c->sql, 0, NULL, &r), c->want);
        if (c->constraint) {
                assert_string_equal(host_api.constraint(r), c->constraint);
                assert_string_equal(ctx.response, c->response);
        } else {
                assert_null(r);
                assert_null(ctx.response);
        }
        assert_int_equal(store_txn(db), STORE_TXN_ABORTED); /* the handler must return, not go on */
}

/* The number of the session's statements prepared from sql ('%' for any): host->exec's are named dedupd_h<i>. */
static int prepared(const char *sql)
{
        PGresult *r = NULL;
        const char *p[1] = {sql};
        if (store_query(
                    db,
                    "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'dedupd\\_h%' AND statement LIKE $1",
                    1, p, &r, err, sizeof(err)))
                fail_msg("pg_prepared_statements: %s", err);
        int n = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
        return n;
}

/* exec(sql) with one parameter v returns v * 2 (as text). */
static void doubles(const char *sql, const char *v, const char *want)
{
        struct dedupd_rows *r = NULL;
        const char *p[1] = {v};
        assert_int_equal(host_api.exec(&ctx, sql, 1, p, &r), DEDUPD_EXEC_OK);
        assert_string_equal(host_api.value(r, 0, 0), want);
}

static void exec_prepares_what_runs_again(void **state)
{
        (void)state;
        const char *sql = "SELECT $1::int * 2 /* again */";
        fresh();
        doubles(sql, "1", "2");
        assert_int_equal(prepared(sql), 0); /* seen once: not prepared */
        doubles(sql, "2", "4");
        doubles(sql, "3", "6");
        assert_int_equal(prepared(sql), 1);
        /* A transaction that fails and rolls back keeps what was prepared in it. */
        assert_int_equal(host_api.exec(&ctx, "SELECT 1/0", 0, NULL, NULL), DEDUPD_EXEC_FATAL);
        store_rollback(db);
        fresh();
        doubles(sql, "4", "8");
        assert_int_equal(prepared(sql), 1);
}

static void exec_prepares_again_what_is_gone(void **state)
{
        (void)state;
        const char *sql = "SELECT $1::int * 2 /* gone */";
        fresh();
        doubles(sql, "1", "2");
        doubles(sql, "2", "4");
        /* A handler's DEALLOCATE: the next run fails (in its transaction, as any
         * statement can), the one after is prepared again. */
        assert_int_equal(host_api.exec(&ctx, "DEALLOCATE ALL", 0, NULL, NULL), DEDUPD_EXEC_OK);
        struct dedupd_rows *r = NULL;
        const char *p[1] = {"3"};
        assert_int_equal(host_api.exec(&ctx, sql, 1, p, &r), DEDUPD_EXEC_FATAL);
        fresh();
        doubles(sql, "4", "8");
        assert_int_equal(prepared(sql), 1);
        /* A new session has none of them: prepared again there. */
        store_rollback(db);
        if (store_connect(db, err, sizeof(err)))
                fail_msg("reconnect: %s", err);
        fresh();
        doubles(sql, "5", "10");
        doubles(sql, "6", "12");
        assert_int_equal(prepared(sql), 1);
}

static void exec_keeps_a_bounded_number_prepared(void **state)
{
        (void)state;
        char sql[64], want[16];
        store_rollback(db);
        if (store_connect(db, err, sizeof(err)))
                fail_msg("reconnect: %s", err);
        fresh();
        for (int round = 0; round < 3; round++)
                for (int i = 0; i < 40; i++) { /* a text of its own for each: a handler that builds them */
                        snprintf(sql, sizeof(sql), "SELECT $1::int * 2 + %d - %d", i, i);
                        snprintf(want, sizeof(want), "%d", 2 * (round + i));
                        char v[16];
                        snprintf(v, sizeof(v), "%d", round + i);
                        doubles(sql, v, want);
                }
        assert_int_equal(prepared("%"), 32);
}

/* host->classify: a result of the handler's own (host->conn), judged as exec judges its own. */
static void classify_judges_the_handlers_own_results(void **state)
{
        (void)state;
        PGconn *conn = host_api.conn(&ctx);
        fresh();
        PGresult *r = PQexec(conn, "SELECT 1");
        assert_int_equal(host_api.classify(&ctx, r), DEDUPD_EXEC_OK);
        PQclear(r);
        r = PQexec(conn, "CREATE TEMP TABLE c (v int CONSTRAINT c_v_positive CHECK (v > 0))");
        PQclear(r);
        r = PQexec(conn, "INSERT INTO c VALUES (0)");
        assert_int_equal(host_api.classify(&ctx, r), DEDUPD_EXEC_REJECT);
        assert_string_equal(ctx.response, "rejected: constraint c_v_positive");
        PQclear(r);
        fresh();
        store_rollback(db); /* a batch's BEGIN instead of fresh()'s: it clears what contention was marked */
        if (store_begin_batch(db, err, sizeof(err)))
                fail_msg("BEGIN: %s", err);
        r = PQexec(conn, "DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '40P01'; END $$");
        assert_int_equal(store_last_contended(db), 0); /* not told yet: run on host->conn */
        assert_int_equal(host_api.classify(&ctx, r), DEDUPD_EXEC_RETRY);
        assert_int_equal(store_last_contended(db), 1); /* the batch runs again whole */
        PQclear(r);
        r = PQexec(conn, "SELECT 1"); /* in the aborted transaction: fatal, as exec says */
        assert_int_equal(host_api.classify(&ctx, r), DEDUPD_EXEC_FATAL);
        PQclear(r);
}

static void ensure_schema_creates_once_and_checks_its_probe(void **state)
{
        (void)state;
        const char *probe = "SELECT to_regclass('hello_ledger') IS NOT NULL";
        fresh();
        store_rollback(db); /* init runs in autocommit */
        if (store_exec(db, "DROP TABLE IF EXISTS hello_ledger", err, sizeof(err)))
                fail_msg("%s", err);
        assert_int_equal(host_api.ensure_schema(&ictx, "hello", "CREATE TABLE hello_ledger (idem_key text)", probe), 0);
        assert_int_equal(store_txn(db), STORE_TXN_NONE); /* committed */
        /* There: the DDL is not run at all (this one would fail). */
        assert_int_equal(host_api.ensure_schema(&ictx, "hello", "SELECT 1/0", probe), 0);
        /* A DDL that leaves the probe failing is refused, and rolled back. */
        assert_int_equal(host_api.ensure_schema(&ictx, "other", "CREATE TABLE other_t (a int)",
                                                "SELECT to_regclass('other_missing') IS NOT NULL"),
                         -1);
        assert_non_null(strstr(ictx.error, "its probe still fails after its DDL ran"));
        struct dedupd_rows *r;
        assert_int_equal(host_api.init_exec(&ictx, "SELECT to_regclass('other_t') IS NULL", 0, NULL, &r),
                         DEDUPD_EXEC_OK);
        assert_string_equal(host_api.value(r, 0, 0), "t");
        host_ctx_release(&ictx.head);
}

static void set_evidence_records_valid_names_only(void **state)
{
        (void)state;
        fresh();
        store_rollback(db);
        assert_int_equal(host_api.set_evidence(&ictx, "ledger; DROP TABLE x", "idem_key"), -1);
        assert_non_null(strstr(ictx.error, "is not a table name"));
        assert_int_equal(host_api.set_evidence(&ictx, "ledger", "1key"), -1);
        assert_non_null(strstr(ictx.error, "is not a column name"));
        assert_int_equal(host_api.set_evidence(&ictx, "ledger.entries", NULL), 0);
        assert_int_equal(host_api.set_evidence(&ictx, "transfer_ledger", "idem_key"), 0); /* the last one counts */
        struct dedupd_rows *r;
        const char *p[1] = {"unit"};
        assert_int_equal(host_api.init_exec(&ictx,
                                            "SELECT string_agg(topic || ' ' || handler || ' ' || table_name || '(' ||"
                                            " key_column || ')', ',') FROM dedupd.evidence WHERE namespace = $1",
                                            1, p, &r),
                         DEDUPD_EXEC_OK);
        assert_string_equal(host_api.value(r, 0, 0), "payments test transfer_ledger(idem_key)");
        host_ctx_release(&ictx.head);
}

int main(void)
{
        const char *dsn = getenv("PG_DSN");
        char name[64], *own;
        if (!dsn || !*dsn) {
                fprintf(stderr, "test_host_exec: PG_DSN not set (. .run/env after scripts/services up)\n");
                return 1;
        }
        struct store *admin = store_open(dsn, err, sizeof(err));
        snprintf(name, sizeof(name), "unit_host_exec_%d", (int)getpid());
        char *create = NULL, *drop = NULL;
        if (!admin || asprintf(&create, "CREATE DATABASE %s", name) < 0 ||
            asprintf(&drop, "DROP DATABASE IF EXISTS %s WITH (FORCE)", name) < 0 ||
            store_exec(admin, create, err, sizeof(err)) || asprintf(&own, "%s dbname=%s", dsn, name) < 0) {
                fprintf(stderr, "test_host_exec: %s\n", err);
                return 1;
        }
        int failed = 1;
        if (!(db = store_open(own, err, sizeof(err))) || store_migrate(db, err, sizeof(err))) {
                fprintf(stderr, "test_host_exec: %s\n", err);
        } else {
                struct unit_list l = {0};
                unit_add(&l, "DEDUPD_HOST: the host from a message's context and from init's",
                         the_host_is_reached_from_every_context, NULL);
                unit_add(&l, "exec: rows, values, NULLs and counts, freed by the host",
                         exec_returns_rows_owned_by_the_host, NULL);
                unit_add_table(&l, exec_classifies_a_failure, exec_cases);
                unit_add(&l, "exec: a statement run again is prepared, once a session", exec_prepares_what_runs_again,
                         NULL);
                unit_add(&l, "exec: a statement deallocated, or on a new session, prepared again",
                         exec_prepares_again_what_is_gone, NULL);
                unit_add(&l, "exec: at most 32 statements prepared, every other one still runs",
                         exec_keeps_a_bounded_number_prepared, NULL);
                unit_add(&l, "classify: the handler's own results judged as exec's, contention marked",
                         classify_judges_the_handlers_own_results, NULL);
                unit_add(&l, "ensure_schema: created once, the DDL skipped when there, a failing probe refused",
                         ensure_schema_creates_once_and_checks_its_probe, NULL);
                unit_add(&l, "set_evidence: identifiers only, recorded per topic",
                         set_evidence_records_valid_names_only, NULL);
                failed = unit_run("host_exec", &l);
                host_ctx_release(&ctx.head);
                host_ctx_reset(&ctx);
        }
        store_free(db);
        if (store_exec(admin, drop, err, sizeof(err)))
                fprintf(stderr, "test_host_exec: %s\n", err);
        store_free(admin);
        free(create);
        free(drop);
        free(own);
        return failed;
}
