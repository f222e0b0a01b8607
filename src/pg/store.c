/* store: dedupd's connection to PostgreSQL — connect, run statements, transactions; what a failure means is pg/result. */
#include "pg/store.h"

#include "base/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "ops/metrics.h"
#include "pg/conninfo.h"
#include "pg/layout.h"
#include "pg/session.h"
#include "pg/stmt_cache.h"

/* A batch sends the same few statements every time (claim, outcomes,
 * progress): prepared once per connection they are parsed and planned once,
 * not per batch. */
#define STORE_PREPARED_MAX 16

struct store {
        PGconn *conn;
        char *conninfo;
        int idle_tx_timeout_ms; /* idle_in_transaction_session_timeout; 0: 60 s */
        int64_t deadline_ms;    /* connection attempts end by then; 0: none */
        char target[160];       /* "host:port/db" for logs: never the conninfo (secrets) */
        int batch;              /* a batch's transaction set the read-only default (store_begin_batch) */
        int pooled;             /* a pooler between: each transaction may run in another server session */
        char failure[320];      /* the last failed statement: SQLSTATE and primary message, no detail */
        int keys_conflict;      /* it failed on dedupd.keys' primary key (unique_violation) */
        int contended; /* a statement since the batch's BEGIN failed as a deadlock or a serialization failure */
        const char *prepared[STORE_PREPARED_MAX]; /* the statements prepared on this connection, as "s<i>" */
        struct stmt_cache *handler_stmts;         /* the handlers' statements prepared on it (host->exec) */
        size_t nprepared;
};

/* What the last failure was, in words that quote no value: PostgreSQL's
 * DETAIL ("Failing row contains (...)") may hold a payload's or response's
 * bytes, which a dead-letter header must not carry. */
static void remember_failure(struct store *s, const PGresult *r)
{
        store_failure_text(s->failure, sizeof(s->failure), r);
        s->keys_conflict = store_unique_violation(r, "dedupd", "keys", "keys_pkey") || store_keys_p_violation(r);
        if (store_contention(r))
                s->contended = 1;
}

int store_last_keys_conflict(const struct store *s) { return s->keys_conflict; }

int store_last_contended(const struct store *s) { return s->contended; }

void store_mark_contended(struct store *s) { s->contended = 1; }

struct stmt_cache *store_handler_stmts(const struct store *s) { return s->pooled ? NULL : s->handler_stmts; }

const char *store_last_failure(const struct store *s) { return s->failure; }

/* Server warnings go through the logger, on one line; notices ("already
 * exists, skipping") do not. Decided here rather than by client_min_messages:
 * a session setting would not survive a pooler's change of server session. */
static void notice(void *arg, const PGresult *r)
{
        const char *severity = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
        char buf[1024];
        (void)arg;
        if (severity && strcmp(severity, "WARNING"))
                return;
        snprintf(buf, sizeof(buf), "%s", PQresultErrorMessage(r));
        store_one_line(buf);
        log_warn("postgres", "%s", buf);
}

/* libpq knows where it connected, or tried to: after a failure too. */
static void describe_target(struct store *s)
{
        const char *host = PQhost(s->conn), *port = PQport(s->conn), *db = PQdb(s->conn);
        snprintf(s->target, sizeof(s->target), "%s:%s/%s", host && *host ? host : "?", port && *port ? port : "5432",
                 db && *db ? db : "?");
}

void store_set_connect_deadline(struct store *s, int64_t deadline_ms) { s->deadline_ms = deadline_ms; }

/* PQconnectdb with dedupd's connect_timeout (the conninfo parsed by libpq,
 * never by hand); NULL with the reason when the conninfo does not parse. */
static PGconn *connect_with_timeout(struct store *s, char *err, size_t errsz)
{
        struct conninfo_params p;
        int64_t left = s->deadline_ms ? s->deadline_ms - log_now_ms() : 0;
        char why[512];
        if (conninfo_params_init(&p, s->conninfo, STORE_CONNECT_TIMEOUT_S, s->deadline_ms ? (left > 0 ? left : 1) : 0,
                                 why, sizeof(why))) {
                store_one_line(why);
                snprintf(err, errsz, "the connection string does not parse: %s", why);
                return NULL;
        }
        PGconn *conn = PQconnectdbParams(p.keys, p.values, 0);
        conninfo_params_free(&p);
        return conn;
}

struct store *store_new(const char *conninfo, int idle_tx_timeout_ms)
{
        struct store *s = xcalloc(1, sizeof(*s));
        s->conninfo = xstrdup(conninfo);
        s->idle_tx_timeout_ms = idle_tx_timeout_ms;
        s->handler_stmts = stmt_cache_new();
        return s;
}

struct store *store_open(const char *conninfo, char *err, size_t errsz)
{
        struct store *s = store_new(conninfo, 0);
        char why[1024];
        if (store_connect(s, why, sizeof(why)) != STORE_OK) {
                snprintf(err, errsz, "cannot connect to the database%s%s: %s", s->target[0] ? " " : "", s->target, why);
                store_free(s);
                return NULL;
        }
        return s;
}

PGconn *store_conn(const struct store *s) { return s->conn; }

const char *store_target(const struct store *s) { return s->target; }

enum store_rc store_connect(struct store *s, char *err, size_t errsz)
{
        if (s->conn)
                PQfinish(s->conn);
        s->nprepared = 0; /* a new session has none */
        stmt_cache_forget(s->handler_stmts);
        if (!(s->conn = connect_with_timeout(s, err, errsz)))
                return STORE_ERROR;
        describe_target(s);
        if (PQstatus(s->conn) != CONNECTION_OK) {
                /* PQerrorMessage names host and port, never the password. */
                store_error_text(err, errsz, s->conn, NULL);
                PQfinish(s->conn);
                s->conn = NULL;
                return STORE_CONN;
        }
        PQsetNoticeReceiver(s->conn, notice, NULL);
        enum store_rc rc = session_setup(s->conn, &s->pooled, err, errsz);
        if (rc == STORE_OK && s->pooled)
                log_info("store",
                         "%s is behind a connection pooler: no read-only default between batches, "
                         "instance liveness by its lease (docs/operating.md: Behind PgBouncer)",
                         s->target);
        if (rc != STORE_OK) {
                PQfinish(s->conn);
                s->conn = NULL;
        }
        return rc;
}

enum store_txn store_txn(const struct store *s)
{
        if (!store_ok(s))
                return STORE_TXN_NONE;
        switch (PQtransactionStatus(s->conn)) {
        case PQTRANS_INTRANS: return STORE_TXN_OPEN;
        case PQTRANS_INERROR: return STORE_TXN_ABORTED;
        default: return STORE_TXN_NONE;
        }
}

enum store_rc store_session_reset(struct store *s, int guard, int *held, char *err, size_t errsz)
{
        if (!store_ok(s)) {
                *held = 0;
                snprintf(err, errsz, "not connected");
                return STORE_CONN;
        }
        return session_restore(s->conn, s->idle_tx_timeout_ms, guard, held, err, errsz);
}

void store_free(struct store *s)
{
        if (!s)
                return;
        if (s->conn)
                PQfinish(s->conn);
        stmt_cache_free(s->handler_stmts);
        free(s->conninfo);
        free(s);
}

int store_ok(const struct store *s) { return s->conn && PQstatus(s->conn) == CONNECTION_OK; }

int store_session_pid(const struct store *s) { return s->conn ? PQbackendPID(s->conn) : 0; }

int store_idle(const struct store *s) { return store_ok(s) && PQtransactionStatus(s->conn) == PQTRANS_IDLE; }

enum store_rc store_exec(struct store *s, const char *sql, char *err, size_t errsz)
{
        return store_exec_as_written(s, keys_layout_sql(sql), err, errsz);
}

enum store_rc store_exec_as_written(struct store *s, const char *sql, char *err, size_t errsz)
{
        PGresult *r;
        enum store_rc rc = STORE_OK;
        if (!s->conn) {
                snprintf(err, errsz, "not connected");
                return STORE_CONN;
        }
        r = PQexec(s->conn, sql);
        if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
                store_error_text(err, errsz, s->conn, r);
                remember_failure(s, r);
                rc = store_classify(s->conn, r);
        }
        PQclear(r);
        return rc;
}

int store_pooled(const struct store *s) { return s->pooled; }

/* Without its idle-transaction bound a stopped zombie would block its
 * successor without limit: every transaction of dedupd's sets it. */
enum store_rc store_begin(struct store *s, char *err, size_t errsz)
{
        if (!s->conn) {
                snprintf(err, errsz, "not connected");
                return STORE_CONN;
        }
        return session_begin(s->conn, NULL, "BEGIN", s->idle_tx_timeout_ms, err, errsz);
}

/*
 * A batch's transaction is the one a handler shares: while it is open, the
 * session's transactions default to read-only, so a handler that ended it
 * (ROLLBACK) and went on writing, in autocommit or in a BEGIN of its own,
 * writes nothing; dedupd's own is BEGIN READ WRITE. The default is set in a
 * transaction of its own (a ROLLBACK must not take it back) and reset after
 * COMMIT or ROLLBACK, each in the same round trip. Behind a pooler the
 * session is not dedupd's to set: the next transaction may run in another
 * one, and the default would stay with another client. There a handler that
 * ends the transaction is still caught (pg/session.h) and its message failed,
 * but what it wrote after is not stopped.
 */
#define BATCH_DEFAULT_ON "SET default_transaction_read_only = on"
#define BATCH_DEFAULT_OFF "RESET default_transaction_read_only"

enum store_rc store_begin_batch(struct store *s, char *err, size_t errsz)
{
        if (!s->conn) {
                snprintf(err, errsz, "not connected");
                return STORE_CONN;
        }
        s->batch = !s->pooled;
        s->contended = 0;
        return session_begin(s->conn, s->batch ? BATCH_DEFAULT_ON : NULL, "BEGIN READ WRITE", s->idle_tx_timeout_ms,
                             err, errsz);
}

enum store_rc store_commit(struct store *s, char *err, size_t errsz)
{
        if (!s->batch || !s->conn)
                return store_exec(s, "COMMIT", err, errsz);
        s->batch = 0;
        return session_pair(s->conn, "COMMIT", BATCH_DEFAULT_OFF, err, errsz);
}

void store_rollback(struct store *s)
{
        char err[256];
        int open = s->conn && PQtransactionStatus(s->conn) != PQTRANS_IDLE && PQstatus(s->conn) == CONNECTION_OK;
        enum store_rc rc = STORE_OK;
        /* A ROLLBACK that fails leaves nothing behind: the connection is gone
         * and the server rolled the transaction back itself. */
        if (s->batch && store_ok(s))
                rc = open ? session_pair(s->conn, "ROLLBACK", BATCH_DEFAULT_OFF, err, sizeof(err))
                          : store_exec(s, BATCH_DEFAULT_OFF, err, sizeof(err));
        else if (open)
                rc = store_exec(s, "ROLLBACK", err, sizeof(err));
        s->batch = 0;
        if (rc)
                log_debug("store", "rollback: %s", err);
}

/* A statement's result: kept in *out (or cleared) when it succeeded, else
 * its failure remembered, in err and classified. */
static enum store_rc take_result(struct store *s, PGresult *r, PGresult **out, char *err, size_t errsz)
{
        if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
                store_error_text(err, errsz, s->conn, r);
                remember_failure(s, r);
                enum store_rc rc = store_classify(s->conn, r);
                PQclear(r);
                return rc;
        }
        if (out)
                *out = r;
        else
                PQclear(r);
        return STORE_OK;
}

/* Run a parameterised statement as written; parameters are text unless formats says binary. */
static enum store_rc run_written(struct store *s, const char *sql, int nparams, const char *const *params,
                                 const int *lengths, const int *formats, PGresult **out, char *err, size_t errsz)
{
        if (!s->conn) {
                snprintf(err, errsz, "not connected");
                return STORE_CONN;
        }
        return take_result(s, PQexecParams(s->conn, sql, nparams, NULL, params, lengths, formats, 0), out, err, errsz);
}

/* The same, said of the table of keys in use (pg/layout.h). */
static enum store_rc run_params(struct store *s, const char *sql, int nparams, const char *const *params,
                                const int *lengths, const int *formats, PGresult **out, char *err, size_t errsz)
{
        return run_written(s, keys_layout_sql(sql), nparams, params, lengths, formats, out, err, errsz);
}

enum store_rc store_query_as_written(struct store *s, const char *sql, int nparams, const char *const *params,
                                     PGresult **out, char *err, size_t errsz)
{
        return run_written(s, sql, nparams, params, NULL, NULL, out, err, errsz);
}

static enum store_rc run(struct store *s, const char *sql, int nparams, const char *const *params, PGresult **out,
                         char *err, size_t errsz)
{
        return run_params(s, sql, nparams, params, NULL, NULL, out, err, errsz);
}

enum store_rc store_query(struct store *s, const char *sql, int nparams, const char *const *params, PGresult **out,
                          char *err, size_t errsz)
{
        return run(s, sql, nparams, params, out, err, errsz);
}

/* The name sql is prepared under on this connection ("s3"), preparing it
 * first; NULL when it cannot be kept (the table is full) and err empty, or
 * with err set when PREPARE failed (rc). */
static const char *prepared_name(struct store *s, const char *sql, char *name, size_t namesz, enum store_rc *rc,
                                 char *err, size_t errsz)
{
        size_t i;
        *rc = STORE_OK;
        for (i = 0; i < s->nprepared; i++)
                if (s->prepared[i] == sql || !strcmp(s->prepared[i], sql))
                        break;
        snprintf(name, namesz, "dedupd_s%zu", i);
        if (i < s->nprepared)
                return name;
        if (i == STORE_PREPARED_MAX)
                return NULL;
        PGresult *r = PQprepare(s->conn, name, keys_layout_sql(sql), 0, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
                store_error_text(err, errsz, s->conn, r);
                remember_failure(s, r);
                *rc = store_classify(s->conn, r);
                PQclear(r);
                return NULL;
        }
        PQclear(r);
        s->prepared[s->nprepared++] = sql;
        return name;
}

enum store_rc store_query_hot(struct store *s, const char *sql, int nparams, const char *const *params, PGresult **out,
                              char *err, size_t errsz)
{
        char name[24];
        enum store_rc rc;
        const char *n;
        if (!s->conn || s->pooled) /* behind a pooler, a session's statements may be in another server */
                return run(s, sql, nparams, params, out, err, errsz);
        if (!(n = prepared_name(s, sql, name, sizeof(name), &rc, err, errsz)))
                return rc ? rc : run(s, sql, nparams, params, out, err, errsz);
        return take_result(s, PQexecPrepared(s->conn, n, nparams, params, NULL, NULL, 0), out, err, errsz);
}

enum store_rc store_query_binary(struct store *s, const char *sql, int nparams, const char *const *params,
                                 const int *lengths, const int *formats, PGresult **out, char *err, size_t errsz)
{
        return run_params(s, sql, nparams, params, lengths, formats, out, err, errsz);
}
