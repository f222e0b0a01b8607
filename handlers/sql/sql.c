/* sql: the declarative handler — one parameterised statement per message from the config, a batch's statements pipelined. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "dedupd/handler.h"
#include "statement.h"

/*
 * handler:
 *   path: /usr/lib/dedupd/sql.so
 *   config:
 *     statement: >
 *       WITH d AS (UPDATE account SET balance = balance - {json:amount}::bigint
 *                  WHERE user_id = {json:user_id}::bigint AND balance >= {json:amount}::bigint
 *                  RETURNING user_id)
 *       INSERT INTO transfer_ledger (idem_key, user_id, amount)
 *       SELECT {idem_key}, user_id, {json:amount}::bigint FROM d
 *       RETURNING 'OK: debited ' || amount
 *     reject: insufficient balance
 *     evidence: {table: transfer_ledger, key_column: idem_key}
 *
 * `evidence` (optional) names the table holding one row per applied message
 * and the column holding its idempotency key ({idem_key}): dedupctl verify
 * then counts the effects there (host->set_evidence); key_column defaults to
 * idem_key.
 *
 * A message is applied when the statement returns a row (the first column
 * of the first row, when not NULL, is the stored response), and rejected
 * with `reject` when it returns none: the statement must then have changed
 * nothing, which one statement guarantees when its writes depend on each
 * other (as the CTE above). No savepoint is needed, so a batch's statements
 * go out in libpq's pipeline mode, `pipeline_depth` at a time, and the
 * batch waits on the wire once per depth instead of once per message. An
 * SQL error retries the batch; the message whose statement failed is the one
 * that counts an attempt toward retry.max_attempts.
 *
 * Nothing is prepared by name: behind a pooler in transaction mode (PgBouncer)
 * the next transaction may run in another server session, where a named
 * statement does not exist. A batch parses the statement once, unnamed, in
 * its first stretch, and every stretch binds it per message: the batch runs
 * in one transaction, so in one server session, and nothing else parses on
 * the connection while the handler has it.
 */

#define DEFAULT_REJECT "rejected: the statement returned no row"
#define DEFAULT_DEPTH 256

struct sql {
        struct sql_statement *st;
        char *reject;
        int depth;
};

static void set_err(char *err, size_t errsz, const char *what, PGconn *conn)
{
        char pg[400];
        snprintf(pg, sizeof(pg), "%s", PQerrorMessage(conn));
        pg[strcspn(pg, "\n")] = '\0';
        snprintf(err, errsz, "%s: %s", what, pg);
}

/* The statement must prepare and return rows: checked once, at start. Parsed
 * and described before one sync point, so in one server session whatever the
 * pooling. */
static int check_statement(struct sql *s, PGconn *conn, char *err, size_t errsz)
{
        static const char *const what[2] = {"the statement does not prepare", "the statement cannot be described"};
        int fields = -1, bad = 0;
        if (!PQenterPipelineMode(conn) || !PQsendPrepare(conn, "", s->st->sql, (int)s->st->nparams, NULL) ||
            !PQsendDescribePrepared(conn, "") || !PQpipelineSync(conn)) {
                set_err(err, errsz, "the statement cannot be sent", conn);
                PQexitPipelineMode(conn);
                return -1;
        }
        for (int step = 0; step < 2; step++) {
                PGresult *r = PQgetResult(conn);
                if (PQresultStatus(r) == PGRES_COMMAND_OK && step == 1)
                        fields = PQnfields(r);
                else if (PQresultStatus(r) != PGRES_COMMAND_OK && !bad++) {
                        char pg[400];
                        snprintf(pg, sizeof(pg), "%s", r ? PQresultErrorMessage(r) : PQerrorMessage(conn));
                        pg[strcspn(pg, "\n")] = '\0';
                        snprintf(err, errsz, "%s: %s", what[step], pg);
                }
                PQclear(r);
                while ((r = PQgetResult(conn))) /* the NULL that ends each step's results */
                        PQclear(r);
        }
        PQclear(PQgetResult(conn)); /* PGRES_PIPELINE_SYNC */
        PQexitPipelineMode(conn);
        if (bad)
                return -1;
        if (fields == 0) {
                snprintf(err, errsz,
                         "the statement returns no rows, so dedupd cannot tell applied from rejected: "
                         "end it with RETURNING (a row when applied, none when rejected)");
                return -1;
        }
        return 0;
}

static int config_int(const struct dedupd_host *host, struct dedupd_init_ctx *ictx, const char *name, int dflt, int min,
                      int max, int *out, char *err, size_t errsz)
{
        const char *v = host->config_get(ictx, name);
        char *end;
        long n = v ? strtol(v, &end, 10) : dflt;
        if (v && (*end || end == v || n < min || n > max)) {
                snprintf(err, errsz, "%s must be a whole number from %d to %d, not '%s'", name, min, max, v);
                return -1;
        }
        *out = (int)n;
        return 0;
}

/* evidence: {table, key_column}: what dedupctl verify counts, declared to the host. */
static int declare_evidence(const struct dedupd_host *host, struct dedupd_init_ctx *ictx, char *err, size_t errsz)
{
        const char *table = host->config_get(ictx, "evidence.table");
        const char *column = host->config_get(ictx, "evidence.key_column");
        if (!table && !column)
                return 0;
        if (!table || !*table) {
                snprintf(err, errsz,
                         "handler.config.evidence.table is required with evidence.key_column: the table "
                         "holding one row per applied message");
                return -1;
        }
        /* Refused: err left empty, the host's reason is init()'s message. */
        return host->set_evidence(ictx, table, column && *column ? column : NULL);
}

static int sql_init(const struct dedupd_host *host, struct dedupd_init_ctx *ictx, void **state, char *err, size_t errsz)
{
        DEDUPD_HOST_REQUIRE(host, set_evidence, err, errsz); /* and DEDUPD_HOST(ctx) in every call */
        struct sql *s = calloc(1, sizeof(*s));
        const char *reject = host->config_get(ictx, "reject");
        const char *statement = host->config_get(ictx, "statement");
        if (!s) {
                snprintf(err, errsz, "out of memory");
                return -1;
        }
        if (!statement) {
                snprintf(err, errsz, "handler.config.statement is required: the SQL to run per message");
                goto error;
        }
        if (!(s->st = sql_statement_compile(statement, err, errsz)) ||
            config_int(host, ictx, "pipeline_depth", DEFAULT_DEPTH, 1, 10000, &s->depth, err, errsz) ||
            check_statement(s, host->init_conn(ictx), err, errsz) || declare_evidence(host, ictx, err, errsz))
                goto error;
        if (!(s->reject = strdup(reject && *reject ? reject : DEFAULT_REJECT))) {
                snprintf(err, errsz, "out of memory");
                goto error;
        }
        host->init_log(ictx, DEDUPD_LOG_INFO, "statement with %zu parameter(s), pipelined %d deep", s->st->nparams,
                       s->depth);
        *state = s;
        return 0;
error:
        sql_statement_free(s->st);
        free(s);
        return -1;
}

static void sql_fini(void *state)
{
        struct sql *s = state;
        if (!s)
                return;
        sql_statement_free(s->st);
        free(s->reject);
        free(s);
}

/* A failed statement, logged once by the host as exec() logs its own (a
 * deadlock or serialization failure then runs the batch again whole, no
 * message charged); by the handler on a host older than ABI 1.4. */
static void failed(struct dedupd_ctx *ctx, PGconn *conn, const PGresult *r)
{
        const struct dedupd_host *host = DEDUPD_HOST(ctx);
        if (DEDUPD_HOST_HAS(host, classify)) {
                host->classify(ctx, r);
                return;
        }
        host->log(ctx, DEDUPD_LOG_WARN, "key %s: %s", host->idem_key(ctx),
                  r && PQresultErrorMessage(r)[0] ? PQresultErrorMessage(r) : PQerrorMessage(conn));
}

/* A row: applied (its first column the response); none: rejected; an error:
 * retry (its message's attempt, as any SQL error of the statement's). */
static dedupd_result_t verdict(struct sql *s, struct dedupd_ctx *ctx, PGconn *conn, PGresult *r)
{
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
                if (PQresultStatus(r) != PGRES_PIPELINE_ABORTED)
                        failed(ctx, conn, r);
                return DEDUPD_RETRY;
        }
        if (PQntuples(r) == 0) {
                DEDUPD_HOST(ctx)->set_response(ctx, s->reject, strlen(s->reject));
                return DEDUPD_REJECT;
        }
        if (PQnfields(r) > 0 && !PQgetisnull(r, 0, 0))
                DEDUPD_HOST(ctx)->set_response(ctx, PQgetvalue(r, 0, 0), (size_t)PQgetlength(r, 0, 0));
        return DEDUPD_OK;
}

/* The message's values; a source it lacks rejects it, with the reason. */
static int bind(struct sql *s, struct dedupd_ctx *ctx, const struct dedupd_msg *m, char **values)
{
        char err[400];
        if (!sql_statement_bind(s->st, m, values, err, sizeof(err)))
                return 0;
        DEDUPD_HOST(ctx)->set_response(ctx, err, strlen(err));
        return -1;
}

static dedupd_result_t sql_handle(void *state, struct dedupd_ctx *ctx, const struct dedupd_msg *msg)
{
        struct sql *s = state;
        PGconn *conn = DEDUPD_HOST(ctx)->conn(ctx);
        char *values[SQL_STATEMENT_MAX_PARAMS];
        if (bind(s, ctx, msg, values))
                return DEDUPD_REJECT;
        PGresult *r =
                PQexecParams(conn, s->st->sql, (int)s->st->nparams, NULL, (const char *const *)values, NULL, NULL, 0);
        dedupd_result_t v = verdict(s, ctx, conn, r);
        PQclear(r);
        sql_values_free(values, s->st->nparams);
        return v;
}

/* ---- a batch, pipelined ------------------------------------------------------- */

/* The batch's parse, unnamed: 0 when it prepared (its results read), -1 not. */
static int read_prepared(struct sql *s, struct dedupd_ctx *ctx, PGconn *conn)
{
        PGresult *r = PQgetResult(conn);
        int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        if (!ok)
                DEDUPD_HOST(ctx)->log(ctx, DEDUPD_LOG_WARN, "preparing the statement: %s",
                                      r && PQresultErrorMessage(r)[0] ? PQresultErrorMessage(r) : PQerrorMessage(conn));
        PQclear(r);
        while ((r = PQgetResult(conn)))
                PQclear(r);
        return ok ? 0 : -1;
}

/* One stretch of the batch (the first one parses the statement): sent
 * without waiting, then its results in order. Returns the index of the
 * message whose statement failed (the first when the statement did not
 * parse), or cnt. */
static size_t run_stretch(struct sql *s, PGconn *conn, struct dedupd_ctx *const *ctxs,
                          const struct dedupd_msg *const *msgs, size_t cnt, dedupd_result_t *results, int parse)
{
        char *values[SQL_STATEMENT_MAX_PARAMS];
        int sent[cnt];
        size_t failed = cnt;
        if (parse && !PQsendPrepare(conn, "", s->st->sql, (int)s->st->nparams, NULL)) {
                DEDUPD_HOST(ctxs[0])->log(ctxs[0], DEDUPD_LOG_WARN, "sending the statement: %s", PQerrorMessage(conn));
                return 0;
        }
        for (size_t i = 0; i < cnt; i++) {
                sent[i] = 0;
                results[i] = DEDUPD_REJECT;
                if (bind(s, ctxs[i], msgs[i], values))
                        continue; /* rejected with its reason, and never sent */
                sent[i] =
                        PQsendQueryPrepared(conn, "", (int)s->st->nparams, (const char *const *)values, NULL, NULL, 0);
                sql_values_free(values, s->st->nparams);
                if (!sent[i]) {
                        DEDUPD_HOST(ctxs[i])->log(ctxs[i], DEDUPD_LOG_WARN, "sending the statement: %s",
                                                  PQerrorMessage(conn));
                        return i; /* the connection is gone: nothing more can be read */
                }
        }
        if (!PQpipelineSync(conn))
                return 0;
        if (parse && read_prepared(s, ctxs[0], conn))
                failed = 0;
        for (size_t i = 0; i < cnt; i++) {
                if (!sent[i])
                        continue;
                PGresult *r = PQgetResult(conn);
                results[i] = verdict(s, ctxs[i], conn, r);
                if (results[i] == DEDUPD_RETRY && failed == cnt && PQresultStatus(r) != PGRES_PIPELINE_ABORTED)
                        failed = i;
                PQclear(r);
                while ((r = PQgetResult(conn))) /* the NULL that ends each statement's results */
                        PQclear(r);
        }
        PGresult *r = PQgetResult(conn); /* PGRES_PIPELINE_SYNC */
        PQclear(r);
        return failed;
}

static dedupd_result_t sql_handle_batch(void *state, struct dedupd_ctx *const *ctxs,
                                        const struct dedupd_msg *const *msgs, size_t cnt, dedupd_result_t *results)
{
        struct sql *s = state;
        PGconn *conn = DEDUPD_HOST(ctxs[0])->conn(ctxs[0]);
        size_t failed = cnt;
        if (!PQenterPipelineMode(conn))
                return DEDUPD_RETRY;
        for (size_t at = 0; at < cnt && failed == cnt; at += (size_t)s->depth) {
                size_t n = cnt - at < (size_t)s->depth ? cnt - at : (size_t)s->depth;
                size_t f = run_stretch(s, conn, ctxs + at, msgs + at, n, results + at, at == 0);
                if (f < n)
                        failed = at + f;
        }
        PQexitPipelineMode(conn);
        if (failed == cnt)
                return DEDUPD_OK;
        /* The transaction is lost; only the message that broke it counts an attempt. */
        for (size_t i = 0; i < cnt; i++)
                results[i] = i == failed ? DEDUPD_RETRY : DEDUPD_OK;
        return DEDUPD_RETRY;
}

static const struct dedupd_handler sql_handler = {
        DEDUPD_HANDLER_MAGIC,
        .name = "sql",
        /* one statement: no row, no change; its state is read-only after init */
        .flags = DEDUPD_HANDLER_F_CLEAN_REJECT | DEDUPD_HANDLER_F_CONCURRENT,
        .init = sql_init,
        .handle = sql_handle,
        .handle_batch = sql_handle_batch,
        .fini = sql_fini,
};
DEDUPD_HANDLER_EXPORT(sql_handler)
