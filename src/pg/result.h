/* result: what a failed statement means to dedupd — its class (retry, reconnect, a refused value, ...) and its message on one line. */
#ifndef DEDUPD_PG_RESULT_H
#define DEDUPD_PG_RESULT_H

#include <stddef.h>

#include <libpq-fe.h>

/** How a failed statement should be treated. */
enum store_rc {
        STORE_OK = 0,
        STORE_RETRY,     /* serialization failure, deadlock, lock timeout: roll back, retry */
        STORE_CONN,      /* connection lost or server shutting down: reconnect, retry */
        STORE_ERROR,     /* anything else: roll back, log, retry with backoff */
        STORE_UNDEFINED, /* a relation or schema that does not exist (not migrated): an error, or "nothing yet" */
        STORE_DATA,      /* the statement failed on the values it was given (a data exception, a constraint, a
                      * trigger's RAISE, a value over a limit): the same values fail again, other values not */
        STORE_CONFLICT,  /* a key another transaction committed after this one looked for it (a unique violation
                         * on the key's own index, told apart by store_unique_violation): roll back and claim
                         * again, pessimistically; never what a classification of a SQLSTATE alone says */
};

/** Classify a failed result (or a NULL result) on conn. */
enum store_rc store_classify(PGconn *conn, const PGresult *res);

/** 1 when res failed with unique_violation (23505) on the named constraint of
 *  schema.table — told apart from every other 23505 (a trigger's, another
 *  unique index's) by PG_DIAG_SCHEMA_NAME, TABLE_NAME and CONSTRAINT_NAME. */
int store_unique_violation(const PGresult *res, const char *schema, const char *table, const char *constraint);
/** 1 when res failed on the key index of one of dedupd.keys_p's partitions
 *  (their names begin keys_p_: pg/layout.h). */
int store_keys_p_violation(const PGresult *res);

/** 1 when res failed as contention between transactions does: a deadlock
 *  (40P01) or a serialization failure (40001). */
int store_contention(const PGresult *res);

/** A failure in words that quote no value: "SQLSTATE 23514: new row ...
 *  violates check constraint ..." (the primary message, never DETAIL, which
 *  may quote a payload's bytes), on one line. */
void store_failure_text(char *buf, size_t sz, const PGresult *res);

/** Fold a libpq message onto one line, in place. */
void store_one_line(char *msg);

/** The failure's message (the result's, else the connection's) on one line. */
void store_error_text(char *err, size_t errsz, PGconn *conn, const PGresult *res);

#endif
