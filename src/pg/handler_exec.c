/* handler_exec: a handler's own statements (host->exec) — run on its context's connection, their failures classified, their rows kept until the call ends. */
#include "pg/handler_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "pg/result.h"
#include "pg/stmt_cache.h"
#include "pg/store.h"

struct dedupd_rows {
        PGresult *res;
        struct dedupd_rows *next;
};

static void keep(struct store_handler_ctx *h, PGresult *res, struct dedupd_rows **rows)
{
        struct dedupd_rows *r = xcalloc(1, sizeof(*r));
        r->res = res;
        r->next = h->rows;
        h->rows = r;
        if (rows)
                *rows = r;
}

/* The classes the store already tells apart, as the handler ABI names them. */
static enum store_handler_rc classify(PGconn *conn, const PGresult *res)
{
        const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
        switch (store_classify(conn, res)) {
        case STORE_RETRY:
        case STORE_CONN: return STORE_HANDLER_TRANSIENT;
        default: return state && !strncmp(state, "23", 2) ? STORE_HANDLER_CONSTRAINT : STORE_HANDLER_FATAL;
        }
}

enum store_handler_rc store_handler_judge(struct store_handler_ctx *h, const PGresult *res, const char **constraint,
                                          char *why, size_t whysz)
{
        PGconn *conn = h->store ? store_conn(h->store) : NULL;
        ExecStatusType st = PQresultStatus(res);
        if (constraint)
                *constraint = res ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) : NULL;
        if (res && (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK || st == PGRES_EMPTY_QUERY ||
                    st == PGRES_PIPELINE_SYNC || st == PGRES_SINGLE_TUPLE))
                return STORE_HANDLER_OK;
        if (res)
                store_failure_text(why, whysz, res);
        else
                store_error_text(why, whysz, conn, NULL);
        if (h->store && store_contention(res))
                store_mark_contended(h->store); /* the batch runs again whole (core/invoke.c) */
        return classify(conn, res);
}

enum store_handler_rc store_handler_exec(struct store_handler_ctx *h, const char *sql, int nparams,
                                         const char *const *params, struct dedupd_rows **rows, char *why, size_t whysz)
{
        PGconn *conn = h->store ? store_conn(h->store) : NULL;
        enum store_handler_rc rc;
        if (rows)
                *rows = NULL;
        if (!conn) {
                snprintf(why, whysz, "no database connection");
                return STORE_HANDLER_TRANSIENT;
        }
        if (!sql || nparams < 0 || (nparams && !params)) {
                snprintf(why, whysz, "no statement, or %d parameters and no array of them", nparams);
                return STORE_HANDLER_FATAL;
        }
        struct stmt_cache *cache = store_handler_stmts(h->store);
        PGresult *res = cache ? stmt_cache_exec(cache, conn, sql, nparams, params)
                              : PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
        ExecStatusType st = PQresultStatus(res);
        if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
                keep(h, res, rows);
                return STORE_HANDLER_OK;
        }
        if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH) {
                snprintf(why, whysz, "COPY is not available through exec (use host->conn)");
                PQclear(res);
                return STORE_HANDLER_FATAL; /* the connection is unusable until COPY ends: the batch rolls back */
        }
        rc = store_handler_judge(h, res, NULL, why, whysz);
        if (rc == STORE_HANDLER_CONSTRAINT)
                keep(h, res, rows);
        else
                PQclear(res);
        return rc;
}

void store_handler_release(struct store_handler_ctx *h)
{
        while (h->rows) {
                struct dedupd_rows *next = h->rows->next;
                PQclear(h->rows->res);
                free(h->rows);
                h->rows = next;
        }
}

int store_handler_rows(const struct dedupd_rows *rows)
{
        if (!rows)
                return 0;
        if (PQresultStatus(rows->res) == PGRES_TUPLES_OK)
                return PQntuples(rows->res);
        if (PQresultStatus(rows->res) == PGRES_COMMAND_OK)
                return atoi(PQcmdTuples(rows->res));
        return 0;
}

const char *store_handler_value(const struct dedupd_rows *rows, int row, int col)
{
        if (!rows || PQresultStatus(rows->res) != PGRES_TUPLES_OK || row < 0 || col < 0 ||
            row >= PQntuples(rows->res) || col >= PQnfields(rows->res) || PQgetisnull(rows->res, row, col))
                return NULL;
        return PQgetvalue(rows->res, row, col);
}

const char *store_handler_constraint(const struct dedupd_rows *rows)
{
        return rows ? PQresultErrorField(rows->res, PG_DIAG_CONSTRAINT_NAME) : NULL;
}
