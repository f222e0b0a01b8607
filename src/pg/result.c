/* result: what a failed statement means to dedupd — its class (retry, reconnect, a refused value, ...) and its message on one line. */
#include "pg/result.h"

#include <stdio.h>
#include <string.h>

#include "ops/metrics.h"

/* What each SQLSTATE dedupd tells apart means for it (PostgreSQL's
 * Appendix A); a row ending in a class matches the whole class. */
static const struct {
        const char *sqlstate;
        enum store_rc rc;
} sqlstates[] = {
        {"40001", STORE_RETRY},     /* serialization_failure */
        {"40P01", STORE_RETRY},     /* deadlock_detected */
        {"55P03", STORE_RETRY},     /* lock_not_available */
        {"08", STORE_CONN},         /* class 08: connection exception */
        {"57P", STORE_CONN},        /* admin_shutdown, crash_shutdown, cannot_connect_now */
        {"53300", STORE_CONN},      /* too_many_connections */
        {"42P01", STORE_UNDEFINED}, /* undefined_table */
        {"3F000", STORE_UNDEFINED}, /* invalid_schema_name */
        {"22", STORE_DATA},         /* class 22: data exception (invalid UTF-8, a value too long, ...) */
        {"23", STORE_DATA},         /* class 23: integrity constraint violation (a CHECK, NOT NULL, ...) */
        {"54", STORE_DATA},         /* class 54: program limit exceeded (an index row too large, ...) */
        {"P0", STORE_DATA},         /* class P0: PL/pgSQL (a trigger's RAISE EXCEPTION) */
};

enum store_rc store_classify(PGconn *conn, const PGresult *res)
{
        const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
        metrics_db_error(state);
        if (!conn || PQstatus(conn) != CONNECTION_OK)
                return STORE_CONN;
        if (!state)
                return res ? STORE_ERROR : STORE_CONN;
        for (size_t i = 0; i < sizeof(sqlstates) / sizeof(sqlstates[0]); i++)
                if (!strncmp(state, sqlstates[i].sqlstate, strlen(sqlstates[i].sqlstate)))
                        return sqlstates[i].rc;
        return STORE_ERROR;
}

/* A field of a failed result, compared (absent: no match). */
static int field_is(const PGresult *res, int field, const char *want)
{
        const char *v = PQresultErrorField(res, field);
        return v && !strcmp(v, want);
}

int store_unique_violation(const PGresult *res, const char *schema, const char *table, const char *constraint)
{
        return res && field_is(res, PG_DIAG_SQLSTATE, "23505") && field_is(res, PG_DIAG_SCHEMA_NAME, schema) &&
               field_is(res, PG_DIAG_TABLE_NAME, table) && field_is(res, PG_DIAG_CONSTRAINT_NAME, constraint);
}

int store_keys_p_violation(const PGresult *res)
{
        const char *table = res ? PQresultErrorField(res, PG_DIAG_TABLE_NAME) : NULL;
        return res && field_is(res, PG_DIAG_SQLSTATE, "23505") && field_is(res, PG_DIAG_SCHEMA_NAME, "dedupd") &&
               table && !strncmp(table, "keys_p_", 7);
}

int store_contention(const PGresult *res)
{
        return res && (field_is(res, PG_DIAG_SQLSTATE, "40P01") || field_is(res, PG_DIAG_SQLSTATE, "40001"));
}

void store_failure_text(char *buf, size_t sz, const PGresult *res)
{
        const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
        const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
        snprintf(buf, sz, "SQLSTATE %s: %s", state ? state : "none", primary ? primary : "no message");
        store_one_line(buf);
}

void store_one_line(char *msg)
{
        /* libpq messages span lines ("...\n\tThis probably means..."); a log
         * entry is one line. */
        char *w = msg;
        for (const char *r = msg; *r; r++) {
                if (*r == '\n' || *r == '\t' || *r == '\r') {
                        if (w > msg && w[-1] != ' ')
                                *w++ = ' ';
                        continue;
                }
                *w++ = *r;
        }
        while (w > msg && w[-1] == ' ')
                w--;
        *w = '\0';
}

void store_error_text(char *err, size_t errsz, PGconn *conn, const PGresult *res)
{
        const char *m = res ? PQresultErrorMessage(res) : NULL;
        if (!m || !*m)
                m = conn ? PQerrorMessage(conn) : "no connection";
        snprintf(err, errsz, "%s", m);
        store_one_line(err);
}
