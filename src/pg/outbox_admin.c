/* outbox_admin: the operator's statements on dedupd.outbox — what waits or was given up, given-up rows put back for the relay or dropped. */
#include "pg/outbox_admin.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/mem.h"
#include "pg/array.h"

#define LIST_COLUMNS                                                                                                   \
        "SELECT id, CASE WHEN given_up_at IS NOT NULL THEN 'given up'"                                                 \
        " WHEN retry_at > now() THEN 'backoff' ELSE 'waiting' END AS state,"                                           \
        " topic, coalesce(idem_key, '') AS key, failures, coalesce(last_error, '') AS reason,"                         \
        " created_at AS created, given_up_at, retry_at FROM dedupd.outbox"

/* $1 namespace, $2 with the waiting rows, $3 limit. Each half along its own
 * partial index (outbox_given_up, outbox_unsent). */
static const char *const sql_list =
        "SELECT * FROM (" LIST_COLUMNS " WHERE namespace = $1 AND given_up_at IS NOT NULL"
        " UNION ALL " LIST_COLUMNS " WHERE namespace = $1 AND sent_at IS NULL AND given_up_at IS NULL AND $2::bool"
        ") r ORDER BY id LIMIT $3::int";

enum store_rc store_outbox_list(struct store *s, const char *ns, int unsent, int limit, PGresult **out, char *err,
                                size_t errsz)
{
        char lim[16];
        snprintf(lim, sizeof(lim), "%d", limit);
        const char *params[3] = {ns, unsent ? "true" : "false", lim};
        return store_query(s, sql_list, 3, params, out, err, errsz);
}

enum store_rc store_outbox_counts(struct store *s, const char *ns, int64_t *given_up, int64_t *waiting, char *err,
                                  size_t errsz)
{
        const char *params[1] = {ns};
        PGresult *r = NULL;
        enum store_rc rc = store_query(s,
                                       "SELECT (SELECT count(*) FROM dedupd.outbox WHERE namespace = $1"
                                       " AND given_up_at IS NOT NULL),"
                                       " (SELECT count(*) FROM dedupd.outbox WHERE namespace = $1 AND sent_at IS NULL"
                                       " AND given_up_at IS NULL)",
                                       1, params, &r, err, errsz);
        if (rc)
                return rc;
        *given_up = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        *waiting = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        PQclear(r);
        return STORE_OK;
}

/* sql with $1 namespace and $2 ids (NULL: every given-up row), returning
 * the ids it touched. */
static enum store_rc touch(struct store *s, const char *sql, const char *ns, const int64_t *ids, size_t nids,
                           int64_t **done, size_t *ndone, char *err, size_t errsz)
{
        struct store_array a = {0};
        PGresult *r = NULL;
        *done = NULL;
        *ndone = 0;
        for (size_t i = 0; ids && i < nids; i++)
                store_array_int(&a, ids[i]);
        const char *params[2] = {ns, ids ? store_array_finish(&a) : NULL};
        enum store_rc rc = store_query(s, sql, 2, params, &r, err, errsz);
        store_array_free(&a);
        if (rc)
                return rc;
        *ndone = (size_t)PQntuples(r);
        *done = xcalloc(*ndone + 1, sizeof(**done));
        for (size_t i = 0; i < *ndone; i++)
                (*done)[i] = strtoll(PQgetvalue(r, (int)i, 0), NULL, 10);
        PQclear(r);
        return STORE_OK;
}

#define GIVEN_UP_CHOSEN                                                                                                \
        "namespace = $1 AND given_up_at IS NOT NULL AND ($2::bigint[] IS NULL OR id = ANY($2::bigint[]))"

enum store_rc store_outbox_retry(struct store *s, const char *ns, const int64_t *ids, size_t nids, int64_t **done,
                                 size_t *ndone, char *err, size_t errsz)
{
        return touch(s,
                     "WITH u AS (UPDATE dedupd.outbox SET given_up_at = NULL, failures = 0, retry_at = NULL"
                     " WHERE " GIVEN_UP_CHOSEN " RETURNING id) SELECT id FROM u ORDER BY id",
                     ns, ids, nids, done, ndone, err, errsz);
}

enum store_rc store_outbox_drop(struct store *s, const char *ns, const int64_t *ids, size_t nids, int64_t **done,
                                size_t *ndone, char *err, size_t errsz)
{
        return touch(s,
                     "WITH d AS (DELETE FROM dedupd.outbox WHERE " GIVEN_UP_CHOSEN " RETURNING id)"
                     " SELECT id FROM d ORDER BY id",
                     ns, ids, nids, done, ndone, err, errsz);
}
