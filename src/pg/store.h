/* store: dedupd's connection to PostgreSQL — connect, run statements, transactions; what a failure means is pg/result. */
#ifndef DEDUPD_PG_STORE_H
#define DEDUPD_PG_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "pg/result.h"

/*
 * Every statement on dedupd.* goes through a store, and lives in pg/: the
 * layers above see functions and enums, never SQL or libpq (tests/lint/
 * layers.sh checks). The store is opaque; its PGconn is handed out only
 * inside pg/: to the handler (pg/handler_conn) and the watchdog's cancel
 * (pg/cancel).
 */
struct store;
struct stmt_cache;

/** Seconds libpq may take to connect when neither the conninfo nor
 *  PGCONNECT_TIMEOUT says: without one, a black-holed host takes the
 *  kernel's TCP retries (minutes) to fail. */
#define STORE_CONNECT_TIMEOUT_S 10

/** A store for conninfo, not connected yet. idle_tx_timeout_ms bounds how
 *  long a transaction may sit idle (a stopped zombie), 0: 60 s. */
struct store *store_new(const char *conninfo, int idle_tx_timeout_ms);
/** Disconnect and free (NULL is fine). */
void store_free(struct store *s);
/** (Re)connect; the conninfo (it may hold a password) is never logged. */
enum store_rc store_connect(struct store *s, char *err, size_t errsz) __attribute__((warn_unused_result));
/** Connection attempts end by deadline_ms (log_now_ms()'s clock; 0: no
 *  deadline): connect_timeout is shortened to the time left. */
void store_set_connect_deadline(struct store *s, int64_t deadline_ms);
/** store_new and store_connect in one; NULL with the reason in err
 *  ("cannot connect to the database host:port/db: libpq's reason"). */
struct store *store_open(const char *conninfo, char *err, size_t errsz);
/** The connection, for pg/ only (handler_conn, cancel, probe, audit). NULL when not connected. */
PGconn *store_conn(const struct store *s);
/** "host:port/db", for messages: never the conninfo (secrets). Known once a
 *  connection was attempted. */
const char *store_target(const struct store *s);
/** 1 when the connection is usable. */
int store_ok(const struct store *s);
/** 1 when the connection is usable and no transaction is open on it. */
int store_idle(const struct store *s);

enum store_rc store_exec(struct store *s, const char *sql, char *err, size_t errsz) __attribute__((warn_unused_result));
/** store_exec of sql as it is written, in either layout (pg/layout.h): the
 *  migrations, which name both tables. */
enum store_rc store_exec_as_written(struct store *s, const char *sql, char *err, size_t errsz)
        __attribute__((warn_unused_result));
/** A parameterised statement (all parameters text). On success *out (when
 *  out is not NULL) holds the result, to be PQclear'ed by the caller. */
enum store_rc store_query(struct store *s, const char *sql, int nparams, const char *const *params, PGresult **out,
                          char *err, size_t errsz) __attribute__((warn_unused_result));
/** store_query of sql as it is written, in either layout (pg/layout.h):
 *  for the few statements that name both tables. */
enum store_rc store_query_as_written(struct store *s, const char *sql, int nparams, const char *const *params,
                                     PGresult **out, char *err, size_t errsz) __attribute__((warn_unused_result));
/** 1 when the last failed statement failed on dedupd.keys' primary key
 *  (unique_violation): a key another transaction committed meanwhile. */
int store_last_keys_conflict(const struct store *s);
/** The same, for a statement every batch sends (sql a constant text):
 *  prepared once per connection and executed by name, so the server parses
 *  and plans it once; behind a pooler it is sent as store_query does. */
enum store_rc store_query_hot(struct store *s, const char *sql, int nparams, const char *const *params, PGresult **out,
                              char *err, size_t errsz) __attribute__((warn_unused_result));
/** The same, with binary parameters where formats[i] is 1 (lengths[i] bytes). */
enum store_rc store_query_binary(struct store *s, const char *sql, int nparams, const char *const *params,
                                 const int *lengths, const int *formats, PGresult **out, char *err, size_t errsz)
        __attribute__((warn_unused_result));
/** BEGIN, with dedupd's settings LOCAL to the transaction (pg/session.h). */
enum store_rc store_begin(struct store *s, char *err, size_t errsz) __attribute__((warn_unused_result));
/** 1 when a connection pooler stands between dedupd and the server (seen at
 *  connect): no server session is dedupd's beyond one transaction. */
int store_pooled(const struct store *s);
/** BEGIN of a batch's transaction, the one a handler shares: until its
 *  COMMIT or ROLLBACK, any other transaction on the session is read-only
 *  (a handler that ended dedupd's cannot write outside it) — unless pooled. */
enum store_rc store_begin_batch(struct store *s, char *err, size_t errsz) __attribute__((warn_unused_result));
enum store_rc store_commit(struct store *s, char *err, size_t errsz) __attribute__((warn_unused_result));
void store_rollback(struct store *s);

/** Where the connection's transaction stands. */
enum store_txn {
        STORE_TXN_NONE,    /* no transaction (or no connection) */
        STORE_TXN_OPEN,    /* in a transaction */
        STORE_TXN_ABORTED, /* in a transaction that failed: only ROLLBACK is left */
};
enum store_txn store_txn(const struct store *s);

/** After a handler ran: the session's state (role, search_path, settings)
 *  back to dedupd's; with guard (inside the batch's transaction) the batch's
 *  commit guard taken off, *held 0 when it was gone (the handler ended
 *  dedupd's transaction and began another). See pg/session.h. */
enum store_rc store_session_reset(struct store *s, int guard, int *held, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** The last failed statement as "SQLSTATE 23514: new row ... violates check
 *  constraint ...": no DETAIL, which may quote the values (a payload). */
const char *store_last_failure(const struct store *s);
/** 1 when a statement of the batch's transaction (since store_begin_batch),
 *  dedupd's or a handler's through host->exec, failed as contention between
 *  transactions does (a deadlock, a serialization failure). */
int store_last_contended(const struct store *s);
/** A handler's statement on s failed so (pg/handler_exec.c). */
void store_mark_contended(struct store *s);
/** Where the handlers' statements on s are kept prepared (pg/stmt_cache.h);
 *  NULL behind a pooler, where a session's statements may be in another
 *  server session. */
struct stmt_cache *store_handler_stmts(const struct store *s);

/** The server process of the connection (it tells one session from the
 *  next), 0 when not connected. */
int store_session_pid(const struct store *s);

#endif /* DEDUPD_PG_STORE_H */
