/* instances: dedupd.instances — each running dedupd's owner id and liveness lease, and what "live" means to the crash-loop ledger. */
#include "pg/instances.h"

#include <inttypes.h>
#include <stdio.h>

enum store_rc store_instance_register(struct store *s, const char *owner, const char *ns, int64_t lease_ms,
                                      char *err, size_t errsz)
{
        char lease[24];
        snprintf(lease, sizeof(lease), "%" PRId64, lease_ms);
        const char *params[3] = {owner, ns, lease};
        return store_query(s,
                           "WITH gone AS (DELETE FROM dedupd.instances"
                           " WHERE lease_until < now() - interval '1 hour' AND owner <> $1)"
                           " INSERT INTO dedupd.instances AS i (owner, namespace, backend_pid, backend_start, lease_until)"
                           " VALUES ($1, $2, pg_backend_pid(),"
                           " (SELECT a.backend_start FROM pg_catalog.pg_stat_activity a WHERE a.pid = pg_backend_pid()),"
                           " now() + $3::bigint * interval '1 millisecond')"
                           " ON CONFLICT (owner) DO UPDATE SET backend_pid = EXCLUDED.backend_pid,"
                           " backend_start = EXCLUDED.backend_start, lease_until = EXCLUDED.lease_until",
                           3, params, NULL, err, errsz);
}

enum store_rc store_instance_leave(struct store *s, const char *owner, char *err, size_t errsz)
{
        const char *params[1] = {owner};
        return store_query(s, "DELETE FROM dedupd.instances WHERE owner = $1", 1, params, NULL, err, errsz);
}
