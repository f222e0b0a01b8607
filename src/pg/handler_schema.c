/* handler_schema: a handler's tables created once (host->ensure_schema) — probed, and created under an advisory lock only when missing. */
#include "pg/handler_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "pg/store.h"

/* 1 when the probe says the schema is there, 0 when not, -1 on an error. */
static int probed(struct store *s, const char *probe, char *err, size_t errsz)
{
        PGresult *r = NULL;
        if (store_query(s, probe, 0, NULL, &r, err, errsz))
                return -1;
        int ok = PQntuples(r) > 0 && PQnfields(r) > 0 && !strcmp(PQgetvalue(r, 0, 0), "t");
        PQclear(r);
        return ok;
}

static int fail(struct store *s, const char *what, char *err, size_t errsz)
{
        char why[512];
        snprintf(why, sizeof(why), "%s", err);
        snprintf(err, errsz, "%s: %s", what, why);
        if (store_exec(s, "ROLLBACK", why, sizeof(why))) {
                /* nothing more to say: the first failure is the one reported */
        }
        return -1;
}

int store_handler_ensure_schema(struct store *s, const char *name, const char *ddl, const char *probe, char *err,
                                size_t errsz)
{
        int ready;
        if (!s || !name || !ddl || !probe) {
                snprintf(err, errsz, "ensure_schema: %s", s ? "name, ddl and probe are required" : "no database");
                return -1;
        }
        /* The probe alone first: DDL (even IF NOT EXISTS) queues for a lock on
         * an existing table, and behind a stopped instance's open transaction
         * that would stall this start and every other instance behind it. */
        if ((ready = probed(s, probe, err, errsz)) < 0)
                return fail(s, "the schema's probe failed", err, errsz);
        if (ready)
                return 0;
        char *lock = xasprintf("dedupd.schema:%s", name);
        const char *params[1] = {lock};
        int rc = store_exec(s, "BEGIN", err, errsz) ||
                 store_query(s, "SELECT pg_advisory_xact_lock(hashtext($1))", 1, params, NULL, err, errsz);
        free(lock);
        if (rc)
                return fail(s, "locking for the schema", err, errsz);
        if ((ready = probed(s, probe, err, errsz)) < 0)
                return fail(s, "the schema's probe failed", err, errsz);
        if (!ready && store_exec(s, ddl, err, errsz))
                return fail(s, "creating the schema", err, errsz);
        if (!ready && (ready = probed(s, probe, err, errsz)) <= 0) {
                if (!ready)
                        snprintf(err, errsz, "its probe still fails after its DDL ran: fix the DDL or the probe");
                return fail(s, "creating the schema", err, errsz);
        }
        if (store_exec(s, "COMMIT", err, errsz))
                return fail(s, "committing the schema", err, errsz);
        return 0;
}
