/* replication: what the database says about how its commits reach a standby — whether a failover can lose acknowledged commits. */
#include "pg/replication.h"

#include <stdio.h>
#include <string.h>

enum store_rc store_replication_read(struct store *s, struct store_replication *out, char *err, size_t errsz)
{
        PGresult *res = NULL;
        enum store_rc rc = store_query(s,
                                       "SELECT current_setting('synchronous_commit'),"
                                       " current_setting('synchronous_standby_names'), pg_is_in_recovery()",
                                       0, NULL, &res, err, errsz);
        if (rc != STORE_OK)
                return rc;
        snprintf(out->synchronous_commit, sizeof(out->synchronous_commit), "%s", PQgetvalue(res, 0, 0));
        snprintf(out->synchronous_standby_names, sizeof(out->synchronous_standby_names), "%s", PQgetvalue(res, 0, 1));
        out->in_recovery = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
        PQclear(res);
        return STORE_OK;
}

int replication_sync(const struct store_replication *r, char *why, size_t whysz)
{
        const char *c = r->synchronous_commit;
        if (!r->synchronous_standby_names[0]) {
                snprintf(why, whysz, "the server reports no synchronous standby (synchronous_standby_names is empty)");
                return 0;
        }
        /* on, remote_write, remote_apply wait for the standby; local and off do not. */
        if (strcmp(c, "local") == 0 || strcmp(c, "off") == 0) {
                snprintf(why, whysz, "synchronous_commit is %s: commits do not wait for the standby", c);
                return 0;
        }
        return 1;
}
