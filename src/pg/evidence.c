/* evidence: where each topic's handler counts its effects (host->set_evidence) — declared at init into dedupd.evidence, read and checked by dedupctl verify. */
#include "pg/evidence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

#define IDENT_MAX 63 /* NAMEDATALEN - 1 */

/* Length of the identifier at s (up to stop or the end), 0 when it is none. */
static size_t ident_len(const char *s, const char *stop)
{
        size_t n = 0;
        for (const char *p = s; *p && p != stop; p++, n++) {
                int letter = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_';
                int digit = (*p >= '0' && *p <= '9') || *p == '$';
                if (!letter && !(digit && n))
                        return 0;
        }
        return n <= IDENT_MAX ? n : 0;
}

int store_evidence_names_ok(const char *table, const char *column, char *err, size_t errsz)
{
        const char *dot = table ? strchr(table, '.') : NULL;
        int ok = table && (dot ? ident_len(table, dot) && ident_len(dot + 1, NULL) && !strchr(dot + 1, '.')
                               : ident_len(table, NULL) > 0);
        if (!ok) {
                snprintf(err, errsz, "evidence table '%s' is not a table name (an SQL identifier, or schema.table)",
                         table ? table : "(none)");
                return -1;
        }
        if (!column || !ident_len(column, NULL)) {
                snprintf(err, errsz, "evidence key column '%s' is not a column name (an SQL identifier)",
                         column ? column : "(none)");
                return -1;
        }
        return 0;
}

enum store_rc store_evidence_declare(struct store *s, const char *ns, const char *topic, const char *handler,
                                     const char *table, const char *column, char *err, size_t errsz)
{
        const char *params[5] = {ns, topic, handler, table, column};
        if (store_evidence_names_ok(table, column, err, errsz))
                return STORE_DATA;
        return store_query(s,
                           "INSERT INTO dedupd.evidence (namespace, topic, handler, table_name, key_column)"
                           " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (namespace, topic) DO UPDATE"
                           " SET handler = EXCLUDED.handler, table_name = EXCLUDED.table_name,"
                           " key_column = EXCLUDED.key_column, declared_at = now()"
                           " WHERE (dedupd.evidence.handler, dedupd.evidence.table_name, dedupd.evidence.key_column)"
                           " IS DISTINCT FROM (EXCLUDED.handler, EXCLUDED.table_name, EXCLUDED.key_column)",
                           5, params, NULL, err, errsz);
}

enum store_rc store_evidence_declared(struct store *s, const char *ns, const char *topic, char **handler, char **table,
                                      char **column, char *err, size_t errsz)
{
        const char *params[2] = {ns, topic};
        PGresult *r = NULL;
        enum store_rc rc;
        *handler = *table = *column = NULL;
        rc = store_query(
                s, "SELECT table_name, key_column, handler FROM dedupd.evidence WHERE namespace = $1 AND topic = $2", 2,
                params, &r, err, errsz);
        if (rc == STORE_UNDEFINED)
                return STORE_OK;
        if (rc)
                return rc;
        if (PQntuples(r)) {
                *table = xstrdup(PQgetvalue(r, 0, 0));
                *column = xstrdup(PQgetvalue(r, 0, 1));
                *handler = xstrdup(PQgetvalue(r, 0, 2));
        }
        PQclear(r);
        return STORE_OK;
}

char *store_evidence_quote(struct store *s, const char *name)
{
        const char *dot = strchr(name, '.');
        PGconn *c = store_conn(s);
        char *a = c ? PQescapeIdentifier(c, name, dot ? (size_t)(dot - name) : strlen(name)) : NULL;
        char *b = c && dot ? PQescapeIdentifier(c, dot + 1, strlen(dot + 1)) : NULL;
        char *q = !a || (dot && !b) ? NULL : dot ? xasprintf("%s.%s", a, b) : xstrdup(a);
        PQfreemem(a);
        PQfreemem(b);
        return q;
}

enum store_rc store_evidence_exists(struct store *s, const char *table, const char *column, int *table_ok,
                                    int *column_ok, char *err, size_t errsz)
{
        char *q = store_evidence_quote(s, table);
        PGresult *r = NULL;
        enum store_rc rc;
        if (!q) {
                snprintf(err, errsz, "cannot quote the evidence table %s", table);
                return STORE_ERROR;
        }
        const char *params[2] = {q, column};
        rc = store_query(s,
                         "SELECT to_regclass($1) IS NOT NULL, EXISTS (SELECT 1 FROM pg_catalog.pg_attribute"
                         " WHERE attrelid = to_regclass($1) AND attname = $2 AND attnum > 0 AND NOT attisdropped)",
                         2, params, &r, err, errsz);
        free(q);
        if (rc)
                return rc;
        *table_ok = !strcmp(PQgetvalue(r, 0, 0), "t");
        *column_ok = !strcmp(PQgetvalue(r, 0, 1), "t");
        PQclear(r);
        return STORE_OK;
}
