/* session: what dedupd's connection must be for its own statements — set in each of its transactions, set again after every handler, with the check that the batch's transaction is still dedupd's. */
#include "pg/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Nothing of dedupd's lives in the server session between transactions: behind
 * a pooler in transaction mode every transaction may run in another session,
 * and a setting left in one would reach another client of the pool. So each
 * transaction dedupd begins sets its own, LOCAL: a bound on how long it may sit
 * idle (a stopped zombie would otherwise block its successor's claims) and the
 * login's own role. (Its name in pg_stat_activity comes with the connection:
 * pg/conninfo; which notices are logged is decided here, in the client.)
 */
static const char baseline_sql[] = "SELECT set_config('idle_in_transaction_session_timeout', $1, true),"
                                   " set_config('role', 'none', true)";

/* What a handler may have changed, back to the session's defaults (the
 * server's, the database's and role's, the conninfo's options): a reset,
 * so nothing of the handler's outlives the transaction on the server
 * session either. Then the baseline again. */
static const char *const reset_sql[] = {"RESET ALL", "SET SESSION AUTHORIZATION DEFAULT",
                                        "SELECT set_config('role', 'none', false)"};

/* The batch's commit guard off: its row was put there by the claim. */
static const char guard_sql[] = "DELETE FROM dedupd.txn_guard WHERE xid = pg_current_xact_id_if_assigned()";
/* (Run after RESET ALL: the search_path is the session's default again, not the handler's.) */

/* A new connection: its role the login's, as after every handler, and its
 * server pid — another than libpq's is a pooler's (PgBouncer, like every
 * pooler, gives its clients a cancel key of its own). */
static const char setup_sql[] = "SELECT pg_backend_pid(), set_config('role', 'none', false)";

/* A failed result as a store_rc (never STORE_OK), its message in err. */
static enum store_rc failure(PGconn *conn, const PGresult *r, char *err, size_t errsz)
{
        enum store_rc rc = store_classify(conn, r);
        store_error_text(err, errsz, conn, r);
        return rc == STORE_OK ? STORE_ERROR : rc;
}

static void idle_text(char *buf, size_t sz, int idle_ms) { snprintf(buf, sz, "%d", idle_ms > 0 ? idle_ms : 60000); }

enum store_rc session_setup(PGconn *conn, int *pooled, char *err, size_t errsz)
{
        PGresult *r = PQexecParams(conn, setup_sql, 0, NULL, NULL, NULL, NULL, 0);
        enum store_rc rc =
                PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? STORE_OK : failure(conn, r, err, errsz);
        if (rc == STORE_OK)
                *pooled = atoi(PQgetvalue(r, 0, 0)) != PQbackendPID(conn);
        PQclear(r);
        return rc;
}

/* Send one statement; 0 when libpq could not. */
static int send_one(PGconn *conn, const char *sql, const char *const *params, int nparams)
{
        return PQsendQueryParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
}

/* Send the statements of a restore; the number sent, or -1. */
static int send_restore(PGconn *conn, const char *idle, int guard)
{
        const char *params[1] = {idle};
        int sent = 0;
        for (size_t i = 0; i < sizeof(reset_sql) / sizeof(*reset_sql); i++, sent++)
                if (!send_one(conn, reset_sql[i], NULL, 0))
                        return -1;
        if (!send_one(conn, baseline_sql, params, 1))
                return -1;
        sent++;
        if (guard && !send_one(conn, guard_sql, NULL, 0))
                return -1;
        return sent + (guard != 0);
}

/* Read the results of one statement; the first failure goes to err (and
 * its SQLSTATE to state, when given). */
static enum store_rc read_state(PGconn *conn, enum store_rc rc, int *rows, char *state, char *err, size_t errsz)
{
        PGresult *r;
        while ((r = PQgetResult(conn))) {
                ExecStatusType st = PQresultStatus(r);
                if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
                        *rows = atoi(PQcmdTuples(r));
                else if (rc == STORE_OK) {
                        const char *sqlstate = PQresultErrorField(r, PG_DIAG_SQLSTATE);
                        if (state)
                                snprintf(state, 6, "%s", sqlstate ? sqlstate : "");
                        rc = failure(conn, r, err, errsz);
                }
                PQclear(r);
        }
        return rc;
}

static enum store_rc read_one(PGconn *conn, enum store_rc rc, int *rows, char *err, size_t errsz)
{
        return read_state(conn, rc, rows, NULL, err, errsz);
}

/* Up to the pipeline's sync point. */
static enum store_rc read_sync(PGconn *conn, enum store_rc rc, char *err, size_t errsz)
{
        PGresult *r;
        for (;;) {
                r = PQgetResult(conn);
                if (!r) {
                        if (rc == STORE_OK) {
                                rc = STORE_CONN;
                                store_error_text(err, errsz, conn, NULL);
                        }
                        return rc;
                }
                ExecStatusType st = PQresultStatus(r);
                PQclear(r);
                if (st == PGRES_PIPELINE_SYNC)
                        return rc;
        }
}

enum store_rc session_pair(PGconn *conn, const char *first, const char *then, char *err, size_t errsz)
{
        enum store_rc rc = STORE_OK;
        int ignored;
        if (!PQenterPipelineMode(conn)) {
                store_error_text(err, errsz, conn, NULL);
                return store_classify(conn, NULL);
        }
        if (!send_one(conn, first, NULL, 0) || !PQpipelineSync(conn) || !send_one(conn, then, NULL, 0) ||
            !PQpipelineSync(conn)) {
                store_error_text(err, errsz, conn, NULL);
                PQexitPipelineMode(conn);
                return STORE_CONN;
        }
        rc = read_sync(conn, read_one(conn, rc, &ignored, err, errsz), err, errsz);
        rc = read_sync(conn, read_one(conn, rc, &ignored, err, errsz), err, errsz);
        PQexitPipelineMode(conn);
        return rc;
}

enum store_rc session_begin(PGconn *conn, const char *first, const char *begin, int idle_ms, char *err, size_t errsz)
{
        char idle[24];
        const char *params[1] = {idle};
        enum store_rc rc = STORE_OK;
        int ignored;

        idle_text(idle, sizeof(idle), idle_ms);
        if (!PQenterPipelineMode(conn)) {
                store_error_text(err, errsz, conn, NULL);
                return store_classify(conn, NULL);
        }
        if ((first && (!send_one(conn, first, NULL, 0) || !PQpipelineSync(conn))) || !send_one(conn, begin, NULL, 0) ||
            !send_one(conn, baseline_sql, params, 1) || !PQpipelineSync(conn)) {
                store_error_text(err, errsz, conn, NULL);
                PQexitPipelineMode(conn);
                return STORE_CONN;
        }
        if (first)
                rc = read_sync(conn, read_one(conn, rc, &ignored, err, errsz), err, errsz);
        rc = read_one(conn, rc, &ignored, err, errsz);
        rc = read_sync(conn, read_one(conn, rc, &ignored, err, errsz), err, errsz);
        PQexitPipelineMode(conn);
        return rc;
}

enum store_rc session_restore(PGconn *conn, int idle_ms, int guard, int *held, char *err, size_t errsz)
{
        char idle[24];
        enum store_rc rc = STORE_OK;
        int rows = 0, sent;

        idle_text(idle, sizeof(idle), idle_ms);
        *held = 0;
        if (!PQenterPipelineMode(conn)) {
                store_error_text(err, errsz, conn, NULL);
                return store_classify(conn, NULL);
        }
        sent = send_restore(conn, idle, guard);
        if (sent < 0 || !PQpipelineSync(conn)) {
                store_error_text(err, errsz, conn, NULL);
                PQexitPipelineMode(conn);
                return STORE_CONN;
        }
        char state[6] = "";
        for (int i = 0, ignored; i < sent - guard; i++)
                rc = read_one(conn, rc, &ignored, err, errsz);
        if (guard && rc == STORE_OK)
                rc = read_state(conn, rc, &rows, state, err, errsz); /* the guard's count: the last */
        else if (guard)
                rc = read_one(conn, rc, &rows, err, errsz);
        rc = read_sync(conn, rc, err, errsz);
        PQexitPipelineMode(conn);
        /* A read-only transaction is not the batch's (BEGIN READ WRITE): one a
         * handler began after ending dedupd's. */
        if (guard && !strcmp(state, "25006"))
                rc = STORE_OK;
        *held = guard && rc == STORE_OK && rows > 0;
        return rc;
}
