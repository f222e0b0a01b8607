/* gauges: what the operator's gauges read from the database — PENDING keys and the outbox backlog. */
#include "pg/gauges.h"

#include <stdlib.h>

enum store_rc store_read_gauges(struct store *s, const char *ns, struct store_gauges *g, char *err, size_t errsz)
{
        PGresult *r = NULL;
        const char *params[1] = {ns};
        enum store_rc rc = store_query(s,
                 "SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0),"
                 " (SELECT count(*) FROM dedupd.outbox WHERE namespace = $1 AND sent_at IS NULL)"
                 " FROM dedupd.keys WHERE namespace = $1 AND status = 'PENDING'",
                 1, params, &r, err, errsz);
        if (rc != STORE_OK)
                return rc;
        g->pending = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        g->pending_oldest_s = strtod(PQgetvalue(r, 0, 1), NULL);
        g->outbox_unsent = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
        PQclear(r);
        return STORE_OK;
}
