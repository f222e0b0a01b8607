/* test_store_seam: what core asks of the store instead of libpq — savepoints, transaction state, contention, the session's pid, the watchdog's cancel, the handler's connection — on the real PostgreSQL of PG_DSN. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "core/host.h"
#include "pg/cancel.h"
#include "pg/savepoint.h"
#include "pg/store.h"
#include "unit.h"

static struct store *db;
static char err[1024];

/* The one text value of a one-row statement, copied into out. */
static void value_of(const char *sql, int nparams, const char *const *params, char *out, size_t outsz)
{
        PGresult *r = NULL;
        if (store_query(db, sql, nparams, params, &r, err, sizeof(err)) != STORE_OK)
                fail_msg("%s: %s", sql, err);
        snprintf(out, outsz, "%s", PQntuples(r) == 1 && !PQgetisnull(r, 0, 0) ? PQgetvalue(r, 0, 0) : "(none)");
        PQclear(r);
}

/* Each test starts outside a transaction, whatever the one before left. */
static void fresh(void) { store_rollback(db); }

static void ok(enum store_rc rc, const char *what)
{
        if (rc != STORE_OK)
                fail_msg("%s: %s", what, err);
}

/* What is left of three inserts when the handler's savepoint undoes the
 * first, keeps the second (NEXT marks again) and undoes the third. */
static void savepoints_undo_one_message_alone(void **state)
{
        (void)state;
        fresh();
        char rows[64];
        ok(store_begin(db, err, sizeof(err)), "BEGIN");
        ok(store_exec(db, "CREATE TEMP TABLE seam_sp (x int) ON COMMIT DROP", err, sizeof(err)), "temp table");
        const char *const one[] = {"1"}, *const two[] = {"2"}, *const three[] = {"3"};
        ok(store_savepoint(db, STORE_SAVEPOINT_SET, err, sizeof(err)), "SET");
        ok(store_query(db, "INSERT INTO seam_sp VALUES ($1::int)", 1, one, NULL, err, sizeof(err)), "insert 1");
        ok(store_savepoint(db, STORE_SAVEPOINT_UNDO, err, sizeof(err)), "UNDO");
        ok(store_query(db, "INSERT INTO seam_sp VALUES ($1::int)", 1, two, NULL, err, sizeof(err)), "insert 2");
        ok(store_savepoint(db, STORE_SAVEPOINT_NEXT, err, sizeof(err)), "NEXT");
        ok(store_query(db, "INSERT INTO seam_sp VALUES ($1::int)", 1, three, NULL, err, sizeof(err)), "insert 3");
        ok(store_savepoint(db, STORE_SAVEPOINT_UNDO, err, sizeof(err)), "UNDO");
        value_of("SELECT string_agg(x::text, ',' ORDER BY x) FROM seam_sp", 0, NULL, rows, sizeof(rows));
        assert_string_equal(rows, "2");
        assert_int_equal(store_txn(db), STORE_TXN_OPEN);
        store_rollback(db);
}

/* A handler that released dedupd's savepoint: the next savepoint operation
 * fails, not as a lost connection (invoke.c blames the message), and the
 * transaction is left aborted. */
static void a_released_savepoint_is_the_handlers_doing(void **state)
{
        (void)state;
        fresh();
        ok(store_begin(db, err, sizeof(err)), "BEGIN");
        ok(store_savepoint(db, STORE_SAVEPOINT_SET, err, sizeof(err)), "SET");
        ok(store_exec(db, "RELEASE SAVEPOINT dedupd_msg", err, sizeof(err)), "the handler's RELEASE");
        enum store_rc rc = store_savepoint(db, STORE_SAVEPOINT_UNDO, err, sizeof(err));
        assert_int_not_equal(rc, STORE_OK);
        assert_int_not_equal(rc, STORE_CONN);
        assert_contains(err, "dedupd_msg");
        assert_int_equal(store_txn(db), STORE_TXN_ABORTED);
        store_rollback(db);
        assert_int_equal(store_txn(db), STORE_TXN_NONE);
}

static void transaction_state_follows_the_session(void **state)
{
        (void)state;
        fresh();
        assert_int_equal(store_txn(db), STORE_TXN_NONE);
        ok(store_begin(db, err, sizeof(err)), "BEGIN");
        assert_int_equal(store_txn(db), STORE_TXN_OPEN);
        assert_int_not_equal(store_exec(db, "SELECT 1/0", err, sizeof(err)), STORE_OK);
        assert_int_equal(store_txn(db), STORE_TXN_ABORTED);
        store_rollback(db);
        assert_int_equal(store_txn(db), STORE_TXN_NONE);
}

/* Which failures make txn.c run an optimistic batch again pessimistically. */
struct contention_case {
        const char *name;
        const char *sqlstate;
        int contended;
};

static const struct contention_case contention_cases[] = {
        {"contention: a deadlock (40P01)", "40P01", 1},
        {"contention: a serialization failure (40001)", "40001", 1},
        {"contention: not a lock timeout (55P03, retried but not contention)", "55P03", 0},
        {"contention: not a unique violation (23505)", "23505", 0},
        {"contention: not a division by zero (22012)", "22012", 0},
};

/* pg_temp.seam_raise(code): fails with that SQLSTATE. */
static void raising_function(void)
{
        ok(store_exec(db,
                      "CREATE OR REPLACE FUNCTION pg_temp.seam_raise(code text) RETURNS void LANGUAGE plpgsql AS"
                      " $$BEGIN RAISE EXCEPTION 'raised as %', code USING ERRCODE = code; END$$",
                      err, sizeof(err)),
           "the raising function");
}

static void contention_is_told_by_sqlstate(void **state)
{
        const struct contention_case *c = *state;
        fresh();
        const char *const code[] = {c->sqlstate};
        raising_function();
        ok(store_begin_batch(db, err, sizeof(err)), "the batch's BEGIN");
        assert_int_not_equal(store_query(db, "SELECT pg_temp.seam_raise($1)", 1, code, NULL, err, sizeof(err)),
                             STORE_OK);
        assert_contains(store_last_failure(db), c->sqlstate);
        assert_int_equal(store_last_contended(db), c->contended);
        store_rollback(db);
}

/* Contention is the batch's: a later failure of another kind in the same
 * transaction does not hide it (the handler's statements after its
 * deadlock fail as "transaction aborted"), and the next batch starts clean. */
static void contention_lasts_the_batch(void **state)
{
        (void)state;
        fresh();
        const char *const deadlock[] = {"40P01"};
        raising_function();
        ok(store_begin_batch(db, err, sizeof(err)), "the batch's BEGIN");
        assert_int_not_equal(store_query(db, "SELECT pg_temp.seam_raise($1)", 1, deadlock, NULL, err, sizeof(err)),
                             STORE_OK);
        assert_int_not_equal(store_exec(db, "SELECT 1", err, sizeof(err)), STORE_OK); /* 25P02: aborted */
        assert_contains(store_last_failure(db), "25P02");
        assert_int_equal(store_last_contended(db), 1);
        store_rollback(db);
        ok(store_begin_batch(db, err, sizeof(err)), "the next batch's BEGIN");
        assert_int_equal(store_last_contended(db), 0);
        store_rollback(db);
}

static void session_pid_is_the_servers(void **state)
{
        (void)state;
        fresh();
        char pid[32], mine[32];
        value_of("SELECT pg_backend_pid()::text", 0, NULL, pid, sizeof(pid));
        snprintf(mine, sizeof(mine), "%d", store_session_pid(db));
        assert_string_equal(mine, pid);
}

struct canceller {
        struct store_cancel *c;
        int rc;
        char err[256];
};

static void *cancel_soon(void *arg)
{
        struct canceller *k = arg;
        usleep(300 * 1000);
        k->rc = store_cancel_send(k->c, k->err, sizeof(k->err));
        return NULL;
}

/* The watchdog's cancel, sent from another thread, ends the statement
 * running on the connection it was aimed at. */
static void cancel_ends_the_running_statement(void **state)
{
        (void)state;
        fresh();
        struct canceller k = {.c = store_cancel_new()};
        pthread_t t;
        store_cancel_aim(k.c, db);
        int64_t started = log_now_ms();
        assert_int_equal(pthread_create(&t, NULL, cancel_soon, &k), 0);
        enum store_rc rc = store_exec(db, "SELECT pg_sleep(30)", err, sizeof(err));
        pthread_join(t, NULL);
        assert_int_equal(k.rc, 0);
        assert_int_not_equal(rc, STORE_OK);
        assert_contains(store_last_failure(db), "57014"); /* query_canceled */
        assert_true(log_now_ms() - started < 10000);
        store_cancel_free(k.c);
}

/* A handle aimed at no connection sends nothing and says so as success (the
 * watchdog armed without a connection). */
static void cancel_aimed_at_nothing_is_a_no_op(void **state)
{
        (void)state;
        struct store *none = store_new("host=127.0.0.1 port=1", 0);
        struct store_cancel *c = store_cancel_new();
        store_cancel_aim(c, none);
        assert_int_equal(store_cancel_send(c, err, sizeof(err)), 0);
        store_cancel_free(c);
        store_free(none);
}

/* host->conn and host->init_conn hand a handler its context's store's connection. */
static void the_handler_gets_the_stores_connection(void **state)
{
        (void)state;
        fresh();
        struct dedupd_ctx ctx = {.head = {.store = db}};
        struct dedupd_init_ctx ictx = {.head = {.store = db}};
        struct dedupd_init_ctx bare = {.head = {.store = NULL}};
        assert_ptr_equal(host_api.conn(&ctx), store_conn(db));
        assert_ptr_equal(host_api.init_conn(&ictx), store_conn(db));
        assert_null(host_api.init_conn(&bare));
        assert_int_equal(PQtransactionStatus(host_api.conn(&ctx)), PQTRANS_IDLE);
}

int main(void)
{
        const char *dsn = getenv("PG_DSN");
        if (!dsn || !*dsn) {
                fprintf(stderr, "test_store_seam: PG_DSN not set (. .run/env after scripts/services up)\n");
                return 1;
        }
        if (!(db = store_open(dsn, err, sizeof(err)))) {
                fprintf(stderr, "test_store_seam: %s\n", err);
                return 1;
        }
        struct unit_list l = {0};
        unit_add(&l, "savepoints: one message's changes undone alone", savepoints_undo_one_message_alone, NULL);
        unit_add(&l, "savepoints: one a handler released fails as its doing",
                 a_released_savepoint_is_the_handlers_doing, NULL);
        unit_add(&l, "transaction state: none, open, aborted, none", transaction_state_follows_the_session, NULL);
        unit_add_table(&l, contention_is_told_by_sqlstate, contention_cases);
        unit_add(&l, "contention: remembered until the next batch begins", contention_lasts_the_batch, NULL);
        unit_add(&l, "session pid: the server's pg_backend_pid()", session_pid_is_the_servers, NULL);
        unit_add(&l, "cancel: ends the statement running, from another thread", cancel_ends_the_running_statement,
                 NULL);
        unit_add(&l, "cancel: aimed at no connection, nothing to send", cancel_aimed_at_nothing_is_a_no_op, NULL);
        unit_add(&l, "handler: host->conn and init_conn are the store's connection",
                 the_handler_gets_the_stores_connection, NULL);
        int failed = unit_run("store_seam", &l);
        store_free(db);
        return failed;
}
