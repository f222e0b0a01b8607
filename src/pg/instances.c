/* instances: dedupd.instances — each running dedupd's owner id and liveness lease, and what "live" means to the crash-loop ledger. */
#include "pg/instances.h"

#include <inttypes.h>
#include <stdio.h>

enum store_rc store_instance_register(struct store *s, const char *owner, const char *ns, int64_t lease_ms, char *err,
                                      size_t errsz)
{
        char lease[24];
        snprintf(lease, sizeof(lease), "%" PRId64, lease_ms);
        const char *params[4] = {owner, ns, lease, store_pooled(s) ? "true" : "false"};
        /* Behind a pooler the server session is the pool's (it outlives a
         * killed dedupd, and a transaction later may run in another): none
         * is recorded, backend_pid 0, and the lease alone decides. */
        return store_query(
                s,
                "WITH gone AS (DELETE FROM dedupd.instances"
                " WHERE lease_until < now() - interval '1 hour' AND owner <> $1),"
                " me AS (SELECT CASE WHEN $4::boolean THEN 0 ELSE pg_backend_pid() END AS pid)"
                " INSERT INTO dedupd.instances AS i (owner, namespace, backend_pid, backend_start, lease_until)"
                " SELECT $1, $2, me.pid,"
                " (SELECT a.backend_start FROM pg_catalog.pg_stat_activity a WHERE a.pid = me.pid),"
                " now() + $3::bigint * interval '1 millisecond' FROM me"
                " ON CONFLICT (owner) DO UPDATE SET backend_pid = EXCLUDED.backend_pid,"
                " backend_start = EXCLUDED.backend_start, lease_until = EXCLUDED.lease_until",
                4, params, NULL, err, errsz);
}

enum store_rc store_instance_leave(struct store *s, const char *owner, char *err, size_t errsz)
{
        const char *params[1] = {owner};
        return store_query(s, "DELETE FROM dedupd.instances WHERE owner = $1", 1, params, NULL, err, errsz);
}
