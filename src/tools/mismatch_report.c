/* mismatch_report: the fingerprint mismatches of a namespace, as verify and stats print them. */
#include "tools/mismatch_report.h"

#include <stdio.h>

#include "pg/audit.h"

int mismatch_report(struct store *s, const char *ns, char *err, size_t errsz)
{
        PGresult *count = NULL, *rows = NULL;
        int rc = -1;
        if (store_mismatch_summary(s, ns, MISMATCH_EXAMPLES, &count, &rows, err, errsz))
                goto out;
        printf("\nfingerprint mismatches (a known key with another payload: a client or key-design bug)\n");
        printf("  %-32s %10s\n", "total", PQgetvalue(count, 0, 0));
        for (int i = 0; i < PQntuples(rows); i++)
                printf("  %s key %s from %s/%s offset %s (%s)\n", i ? "    " : "e.g.", PQgetvalue(rows, i, 0),
                       PQgetvalue(rows, i, 1), PQgetvalue(rows, i, 2), PQgetvalue(rows, i, 3), PQgetvalue(rows, i, 4));
        rc = 0;
out:
        PQclear(count);
        PQclear(rows);
        return rc;
}
