/* tenants: each tenant's live keys (dedupd.tenant_usage) — read for a quota, added in the batch's transaction, taken back where keys are deleted. */
#include "pg/tenants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg/array.h"

enum store_rc store_tenant_live(struct store *s, const char *ns, const char *topic, const char *const *tenants,
                                size_t n, int64_t *live, char *err, size_t errsz)
{
        struct store_array a = {0};
        PGresult *r = NULL;
        for (size_t i = 0; i < n; i++) {
                store_array_text(&a, tenants[i]);
                live[i] = 0;
        }
        const char *params[3] = {ns, topic, store_array_finish(&a)};
        enum store_rc rc = store_query(s,
                                       "SELECT tenant, sum(live) FROM dedupd.tenant_usage WHERE namespace = $1"
                                       " AND topic = $2 AND tenant = ANY($3::text[]) GROUP BY tenant",
                                       3, params, &r, err, errsz);
        store_array_free(&a);
        if (rc)
                return rc;
        for (int row = 0; row < PQntuples(r); row++)
                for (size_t i = 0; i < n; i++)
                        if (!strcmp(tenants[i], PQgetvalue(r, row, 0)))
                                live[i] = strtoll(PQgetvalue(r, row, 1), NULL, 10);
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_tenant_add(struct store *s, const char *ns, const char *topic, const char *const *tenants,
                               const int32_t *parts, size_t n, char *err, size_t errsz)
{
        struct store_array t = {0}, p = {0};
        if (!n)
                return STORE_OK;
        for (size_t i = 0; i < n; i++) {
                store_array_text(&t, tenants[i]);
                store_array_int(&p, parts[i]);
        }
        const char *params[4] = {ns, topic, store_array_finish(&t), store_array_finish(&p)};
        enum store_rc rc =
                store_query(s,
                            "INSERT INTO dedupd.tenant_usage AS u (namespace, tenant, topic, partition, live)"
                            " SELECT $1, x.t, $2, x.p, count(*) FROM unnest($3::text[], $4::int[]) AS x(t, p)"
                            " GROUP BY x.t, x.p ORDER BY x.t COLLATE \"C\", x.p"
                            " ON CONFLICT (namespace, tenant, topic, partition)"
                            " DO UPDATE SET live = u.live + EXCLUDED.live, updated_at = now()",
                            4, params, NULL, err, errsz);
        store_array_free(&t);
        store_array_free(&p);
        return rc;
}

enum store_rc store_unclaim(struct store *s, const char *ns, const char *const *keys, size_t n, char *err, size_t errsz)
{
        struct store_array k = {0};
        if (!n)
                return STORE_OK;
        for (size_t i = 0; i < n; i++)
                store_array_text(&k, keys[i]);
        const char *params[2] = {ns, store_array_finish(&k)};
        enum store_rc rc = store_query(s, "DELETE FROM dedupd.keys WHERE namespace = $1 AND idem_key = ANY($2::text[])",
                                       2, params, NULL, err, errsz);
        store_array_free(&k);
        return rc;
}

enum store_rc store_tenant_summary(struct store *s, const char *ns, int limit, PGresult **out, char *err, size_t errsz)
{
        char lim[16];
        snprintf(lim, sizeof(lim), "%d", limit);
        const char *params[2] = {ns, lim};
        return store_query(s,
                           "SELECT topic, tenant, sum(live) AS live_keys FROM dedupd.tenant_usage"
                           " WHERE namespace = $1 GROUP BY topic, tenant ORDER BY 3 DESC, 1, 2 LIMIT $2::int",
                           2, params, out, err, errsz);
}
