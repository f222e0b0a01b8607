/* stmt_cache: a handler's statements (host->exec) prepared on their connection once seen twice, so each is parsed and planned once a session rather than once a batch. Bounded: a handler that builds a new text each time runs it unprepared. */
#ifndef DEDUPD_PG_STMT_CACHE_H
#define DEDUPD_PG_STMT_CACHE_H

#include <libpq-fe.h>

/** Statements kept prepared on one connection, at most. */
#define STMT_CACHE_PREPARED 32

struct stmt_cache;

struct stmt_cache *stmt_cache_new(void);
void stmt_cache_free(struct stmt_cache *c);

/** The connection is a new session (it has none of them prepared). */
void stmt_cache_forget(struct stmt_cache *c);

/** Run sql with its text parameters on conn as PQexecParams would, and
 *  return its result: through a statement prepared under the name
 *  "dedupd_h<i>" when sql (with this many parameters) ran before on this
 *  session and there is room. A failure to prepare is returned as the
 *  statement's failure (it is the one running it would meet: a syntax error,
 *  a missing table, an aborted transaction). */
PGresult *stmt_cache_exec(struct stmt_cache *c, PGconn *conn, const char *sql, int nparams, const char *const *params);

#endif
