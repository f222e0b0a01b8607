/* gauges: what the operator's gauges read from the database — PENDING keys, the outbox backlog and its given-up rows. */
#include "pg/gauges.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

enum store_rc store_read_gauges(struct store *s, const char *ns, struct store_gauges *g, char *err, size_t errsz)
{
        PGresult *r = NULL;
        const char *params[1] = {ns};
        enum store_rc rc =
                store_query(s,
                            "SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0),"
                            " (SELECT count(*) FROM dedupd.outbox WHERE namespace = $1 AND sent_at IS NULL"
                            "  AND given_up_at IS NULL),"
                            " (SELECT count(*) FROM dedupd.outbox WHERE namespace = $1 AND given_up_at IS NOT NULL)"
                            " FROM dedupd.keys WHERE namespace = $1 AND status = 'PENDING'",
                            1, params, &r, err, errsz);
        if (rc != STORE_OK)
                return rc;
        g->pending = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        g->pending_oldest_s = strtod(PQgetvalue(r, 0, 1), NULL);
        g->outbox_unsent = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
        g->outbox_given_up = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_outbox_backlog(struct store *s, const char *ns, int64_t upto, int64_t *unsent, char *err,
                                   size_t errsz)
{
        PGresult *r = NULL;
        char lim[24];
        snprintf(lim, sizeof(lim), "%" PRId64, upto);
        const char *params[2] = {ns, lim};
        /* Counted along the partial index of unsent rows, and no further than
         * asked; a row given up waits for an operator, not for the relay. */
        enum store_rc rc =
                store_query(s,
                            "SELECT count(*) FROM (SELECT 1 FROM dedupd.outbox WHERE namespace = $1 AND sent_at IS NULL"
                            " AND given_up_at IS NULL LIMIT $2::bigint) u",
                            2, params, &r, err, errsz);
        if (rc != STORE_OK)
                return rc;
        *unsent = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
        return STORE_OK;
}
