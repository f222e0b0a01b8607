/* handler_exec: a handler's own statements (host->exec) — run on its context's connection, their failures classified, their rows kept until the call ends. */
#ifndef DEDUPD_PG_HANDLER_EXEC_H
#define DEDUPD_PG_HANDLER_EXEC_H

#include <stddef.h>

#include "pg/handler_conn.h"

/** What a handler's statement did, as the handler ABI tells it apart. */
enum store_handler_rc {
        STORE_HANDLER_OK,
        STORE_HANDLER_TRANSIENT,  /* connection lost, serialization failure, deadlock, lock not available */
        STORE_HANDLER_CONSTRAINT, /* SQLSTATE class 23: the input is refused */
        STORE_HANDLER_FATAL,      /* anything else */
};

/** Run sql with its text parameters on h's connection. *rows (when rows is
 *  not NULL) is set on OK and CONSTRAINT, owned by h until
 *  store_handler_release. On failure why holds "SQLSTATE 40001: could not
 *  serialize ..." (the primary message: never a parameter's bytes). */
enum store_handler_rc store_handler_exec(struct store_handler_ctx *h, const char *sql, int nparams,
                                         const char *const *params, struct dedupd_rows **rows, char *why, size_t whysz);

/** libpq's result, as core hands it on (host->classify) without reading it. */
typedef struct pg_result store_result;

/** Judge a result of a statement the handler ran on h's connection itself
 *  (host->classify), as store_handler_exec judges its own: OK unless it
 *  failed; why as there, *constraint (when not NULL) the constraint it
 *  violated or NULL; a deadlock or serialization failure marked on the
 *  store (store_last_contended). */
enum store_handler_rc store_handler_judge(struct store_handler_ctx *h, const store_result *res, const char **constraint,
                                          char *why, size_t whysz);

/** Free every result of h's statements. */
void store_handler_release(struct store_handler_ctx *h);

/** host->rows, host->value, host->constraint. */
int store_handler_rows(const struct dedupd_rows *rows);
const char *store_handler_value(const struct dedupd_rows *rows, int row, int col);
const char *store_handler_constraint(const struct dedupd_rows *rows);

#endif
