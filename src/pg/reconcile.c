/* reconcile: the SQL behind reconcile() — the in-doubt keys due to be asked, and what the downstream's answer makes of one. */
#include "pg/reconcile.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/mem.h"

enum store_rc store_in_doubt_due(struct store *s, const char *ns, const char *topic, int max_tries, int limit,
                                 struct store_in_doubt **rows, size_t *n, char *err, size_t errsz)
{
        char tries[16], lim[16];
        const char *params[4] = {ns, topic, tries, lim};
        PGresult *r = NULL;
        enum store_rc rc;

        snprintf(tries, sizeof(tries), "%d", max_tries);
        snprintf(lim, sizeof(lim), "%d", limit);
        *rows = NULL;
        *n = 0;
        rc = store_query(s,
                         "SELECT idem_key, coalesce(partition, -1), coalesce(\"offset\", -1), attempts, reconciled"
                         " FROM dedupd.keys"
                         " WHERE namespace = $1 AND topic = $2 AND status = 'EXPIRED' AND reconciled < $3::int"
                         " ORDER BY updated_at LIMIT $4::int",
                         4, params, &r, err, errsz);
        if (rc)
                return rc;
        *n = (size_t)PQntuples(r);
        *rows = xcalloc(*n ? *n : 1, sizeof(**rows));
        for (size_t i = 0; i < *n; i++) {
                (*rows)[i].key = xstrdup(PQgetvalue(r, (int)i, 0));
                (*rows)[i].partition = (int32_t)strtol(PQgetvalue(r, (int)i, 1), NULL, 10);
                (*rows)[i].offset = strtoll(PQgetvalue(r, (int)i, 2), NULL, 10);
                (*rows)[i].attempts = atoi(PQgetvalue(r, (int)i, 3));
                (*rows)[i].reconciled = atoi(PQgetvalue(r, (int)i, 4));
        }
        PQclear(r);
        return STORE_OK;
}

void store_in_doubt_free(struct store_in_doubt *rows, size_t n)
{
        for (size_t i = 0; rows && i < n; i++)
                free(rows[i].key);
        free(rows);
}

enum store_rc store_reconciled(struct store *s, const char *ns, const char *key, enum key_status to,
                               const char *response, int *changed, char *err, size_t errsz)
{
        const char *params[4] = {ns, key, key_status_name(to), response};
        PGresult *r = NULL;
        enum store_rc rc;

        *changed = 0;
        /* The WHERE clause is the compare: a reaper elsewhere or a message
         * that meets the key may answer it at the same time. */
        rc = store_query(s,
                         "UPDATE dedupd.keys SET status = $3, reconciled = reconciled + 1, updated_at = now(),"
                         " owner = NULL,"
                         " response = CASE WHEN $3 IN ('DONE', 'FAILED') THEN $4 ELSE response END,"
                         " lease_until = CASE WHEN $3 = 'PENDING' THEN now() ELSE lease_until END"
                         " WHERE namespace = $1 AND idem_key = $2 AND status = 'EXPIRED'",
                         4, params, &r, err, errsz);
        if (rc)
                return rc;
        *changed = atoi(PQcmdTuples(r)) == 1;
        PQclear(r);
        return STORE_OK;
}
