/* session: what dedupd's connection must be for its own statements — set in each of its transactions, set again after every handler, with the check that the batch's transaction is still dedupd's. */
#ifndef DEDUPD_PG_SESSION_H
#define DEDUPD_PG_SESSION_H

#include <stddef.h>

#include <libpq-fe.h>

#include "pg/result.h"

/*
 * A handler shares dedupd's connection: a SET ROLE, a SET search_path or a
 * session set_config of its would outlive its message and reach dedupd's
 * own statements and every later batch. So after the handler everything a
 * session can change is reset (RESET ALL, the session user and role back to
 * the login's) and dedupd's few settings made again: a handler's session
 * state lasts one batch at most (SET LOCAL, or the role's and database's
 * defaults, or the conninfo's options, are the ways to keep settings).
 * dedupd's own settings are LOCAL to each of its transactions, so none lives
 * in the server session: behind a pooler in transaction mode (PgBouncer's
 * pool_mode = transaction) each transaction may run in another one.
 */

/** A new connection: *pooled 1 when a pooler stands between dedupd and the
 *  server (the server's pid is not the one libpq was given). */
enum store_rc session_setup(PGconn *conn, int *pooled, char *err, size_t errsz) __attribute__((warn_unused_result));

/** Open a transaction with begin (BEGIN, BEGIN READ WRITE) and dedupd's
 *  settings in it, LOCAL (idle_ms: idle_in_transaction_session_timeout); when
 *  first is given, it runs before, in a transaction of its own. One round trip. */
enum store_rc session_begin(PGconn *conn, const char *first, const char *begin, int idle_ms, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** first, a sync point, then then: two statements in one round trip, each
 *  its own transaction unless first opens one (the first failure is rc). */
enum store_rc session_pair(PGconn *conn, const char *first, const char *then, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/**
 * After the handler: the session reset to dedupd's (one round trip). When
 * guard is set (transactional mode, inside the batch's transaction), the
 * batch's commit guard is taken off too, *held 1 when it was still there —
 * 0 means the handler ended dedupd's transaction and began another.
 */
enum store_rc session_restore(PGconn *conn, int idle_ms, int guard, int *held, char *err, size_t errsz)
        __attribute__((warn_unused_result));

#endif
