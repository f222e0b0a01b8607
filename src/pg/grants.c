/* grants: the GRANTs that let a role that owns nothing run dedupd — written by the server (format %I, ::regclass), never by concatenation here. */
#include "pg/grants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

#define DML "SELECT, INSERT, UPDATE, DELETE"

/* Schema dedupd: the schema, its tables, its sequences, its functions. $1 is
 * the role. */
static const char *const schema_grants_sql =
        "SELECT format('GRANT USAGE ON SCHEMA dedupd TO %I', $1::text) "
        "UNION ALL (SELECT format('GRANT %s ON TABLE %I.%I TO %I', "
        "                  CASE WHEN c.relname = 'schema_migrations' THEN 'SELECT' ELSE '" DML "' END, "
        "                  n.nspname, c.relname, $1::text) "
        "  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "  WHERE n.nspname = 'dedupd' AND c.relkind IN ('r', 'p') ORDER BY c.relname) "
        "UNION ALL (SELECT format('GRANT USAGE, SELECT ON SEQUENCE %I.%I TO %I', n.nspname, c.relname, $1::text) "
        "  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "  WHERE n.nspname = 'dedupd' AND c.relkind = 'S' ORDER BY c.relname) "
        /* keys.layout: partitioned makes and drops its partitions through these (SECURITY DEFINER) */
        "UNION ALL (SELECT format('GRANT EXECUTE ON FUNCTION %s TO %I', p.oid::regprocedure, $1::text) "
        "  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "  WHERE n.nspname = 'dedupd' ORDER BY p.proname)";

/* One handler table ($2, resolved as the server resolves it): the table and
 * the schema it lives in. */
static const char *const table_grants_sql =
        "SELECT format('GRANT USAGE ON SCHEMA %I TO %I', n.nspname, $1::text) "
        "  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $2::regclass "
        "  AND NOT EXISTS (SELECT 1 FROM aclexplode(n.nspacl) a " /* PUBLIC has it already (schema public) */
        "                  WHERE a.grantee = 0 AND a.privilege_type = 'USAGE') "
        "UNION ALL SELECT format('GRANT " DML " ON TABLE %s TO %I', $2::regclass, $1::text) "
        /* its serial and identity columns' sequences */
        "UNION ALL (SELECT format('GRANT USAGE, SELECT ON SEQUENCE %s TO %I', s.oid::regclass, $1::text) "
        "  FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S' "
        "  WHERE d.classid = 'pg_class'::regclass AND d.refobjid = $2::regclass AND d.deptype IN ('a', 'i') "
        "  ORDER BY 1)";

static void add_rows(struct grants *g, const PGresult *r)
{
        int n = PQntuples(r);
        g->sql = xrealloc(g->sql, (g->cnt + (size_t)n + 1) * sizeof(*g->sql));
        for (int i = 0; i < n; i++) {
                const char *stmt = PQgetvalue(r, i, 0);
                int dup = 0;
                for (size_t j = 0; j < g->cnt && !dup; j++)
                        dup = !strcmp(g->sql[j], stmt); /* two tables in one schema: one USAGE */
                if (!dup)
                        g->sql[g->cnt++] = xstrdup(stmt);
        }
}

enum store_rc store_grants(struct store *s, const char *role, const char *const *tables, size_t ntables,
                           struct grants *out, char *err, size_t errsz)
{
        PGresult *r = NULL;
        enum store_rc rc;
        const char *params[2] = {role, NULL};

        memset(out, 0, sizeof(*out));
        if ((rc = store_query(s, "SELECT to_regnamespace('dedupd') IS NOT NULL", 0, NULL, &r, err, errsz)))
                return rc;
        int migrated = PQgetvalue(r, 0, 0)[0] == 't';
        PQclear(r);
        if (!migrated) {
                snprintf(err, errsz, "schema dedupd does not exist: run dedupctl migrate first (as its owner)");
                return STORE_ERROR;
        }
        if ((rc = store_query(s, schema_grants_sql, 1, params, &r, err, errsz)))
                return rc;
        add_rows(out, r);
        PQclear(r);
        for (size_t i = 0; i < ntables; i++) {
                char why[512];
                params[1] = tables[i];
                if ((rc = store_query(s, table_grants_sql, 2, params, &r, why, sizeof(why)))) {
                        snprintf(err, errsz, "handler table %s: %s", tables[i], why);
                        grants_free(out);
                        return rc;
                }
                add_rows(out, r);
                PQclear(r);
        }
        return STORE_OK;
}

enum store_rc store_grants_apply(struct store *s, const struct grants *g, char *err, size_t errsz)
{
        enum store_rc rc;
        if ((rc = store_begin(s, err, errsz)))
                return rc;
        for (size_t i = 0; i < g->cnt; i++)
                if ((rc = store_exec(s, g->sql[i], err, errsz))) {
                        store_rollback(s);
                        return rc;
                }
        return store_commit(s, err, errsz);
}

void grants_free(struct grants *g)
{
        for (size_t i = 0; i < g->cnt; i++)
                free(g->sql[i]);
        free(g->sql);
        memset(g, 0, sizeof(*g));
}
