/* attempts: the crash-loop ledger in dedupd.attempts — batch starts that never committed. */
#include "pg/attempts.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* The ledger row's key columns as text parameters. */
struct attempt_params {
        char part[16], offset[24], extra[24];
};

static void attempt_params(struct attempt_params *ap, int32_t partition, int64_t offset, int64_t extra)
{
        snprintf(ap->part, sizeof(ap->part), "%" PRId32, partition);
        snprintf(ap->offset, sizeof(ap->offset), "%" PRId64, offset);
        snprintf(ap->extra, sizeof(ap->extra), "%" PRId64, extra);
}

enum store_rc store_attempt_covering(struct store *s, const char *ns, const char *topic, int32_t partition,
                                     int64_t offset, int *found, int *attempts, int64_t *until, char *err,
                                     size_t errsz)
{
        struct attempt_params ap;
        PGresult *r = NULL;
        enum store_rc rc;

        attempt_params(&ap, partition, offset, 0);
        const char *params[4] = {ns, topic, ap.part, ap.offset};
        rc = store_query(s,
                 "SELECT attempts, until_offset FROM dedupd.attempts"
                 " WHERE namespace = $1 AND topic = $2 AND partition = $3::int AND NOT single"
                 " AND \"offset\" <= $4::bigint AND until_offset > $4::bigint"
                 " ORDER BY \"offset\" DESC LIMIT 1",
                 4, params, &r, err, errsz);
        if (rc)
                return rc;
        *found = PQntuples(r) == 1;
        if (*found) {
                *attempts = atoi(PQgetvalue(r, 0, 0));
                *until = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        }
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_attempt_batch(struct store *s, const char *ns, const char *topic, int32_t partition,
                                  int64_t from, int64_t until, int *attempts, char *err, size_t errsz)
{
        struct attempt_params ap;
        PGresult *r = NULL;
        enum store_rc rc;

        attempt_params(&ap, partition, from, until);
        const char *params[5] = {ns, topic, ap.part, ap.offset, ap.extra};
        /* Autocommit: the count must survive the crash it is counting. */
        rc = store_query(s,
                 "INSERT INTO dedupd.attempts AS a (namespace, topic, partition, \"offset\", single, until_offset)"
                 " VALUES ($1, $2, $3::int, $4::bigint, false, $5::bigint)"
                 " ON CONFLICT (namespace, topic, partition, \"offset\", single) DO UPDATE SET"
                 " attempts = a.attempts + 1, last_at = now(),"
                 " until_offset = GREATEST(a.until_offset, EXCLUDED.until_offset)"
                 " RETURNING attempts",
                 5, params, &r, err, errsz);
        if (rc)
                return rc;
        *attempts = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_attempt_single(struct store *s, const char *ns, const char *topic, int32_t partition,
                                   int64_t offset, int inherited, int *attempts, int *inherited_out,
                                   char *err, size_t errsz)
{
        struct attempt_params ap;
        PGresult *r = NULL;
        enum store_rc rc;

        attempt_params(&ap, partition, offset, inherited);
        const char *params[5] = {ns, topic, ap.part, ap.offset, ap.extra};
        rc = store_query(s,
                 "INSERT INTO dedupd.attempts AS a (namespace, topic, partition, \"offset\", single,"
                 " until_offset, inherited)"
                 " VALUES ($1, $2, $3::int, $4::bigint, true, $4::bigint + 1, $5::int)"
                 " ON CONFLICT (namespace, topic, partition, \"offset\", single) DO UPDATE SET"
                 " attempts = a.attempts + 1, last_at = now()"
                 " RETURNING attempts, inherited",
                 5, params, &r, err, errsz);
        if (rc)
                return rc;
        *attempts = atoi(PQgetvalue(r, 0, 0));
        *inherited_out = atoi(PQgetvalue(r, 0, 1));
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_attempt_release(struct store *s, const char *ns, const char *topic, int32_t partition,
                                    int64_t offset, int single, char *err, size_t errsz)
{
        struct attempt_params ap;
        enum store_rc rc;

        attempt_params(&ap, partition, offset, 0);
        const char *params[5] = {ns, topic, ap.part, ap.offset, single ? "true" : "false"};
        rc = store_query(s,
                 "UPDATE dedupd.attempts SET attempts = attempts - 1"
                 " WHERE namespace = $1 AND topic = $2 AND partition = $3::int AND \"offset\" = $4::bigint"
                 " AND single = $5::boolean",
                 5, params, NULL, err, errsz);
        if (rc)
                return rc;
        return store_query(s,
                   "DELETE FROM dedupd.attempts"
                   " WHERE namespace = $1 AND topic = $2 AND partition = $3::int AND \"offset\" = $4::bigint"
                   " AND single = $5::boolean AND attempts <= 0",
                   5, params, NULL, err, errsz);
}

enum store_rc store_attempts_done(struct store *s, const char *ns, const char *topic,
                                  int32_t partition, int64_t next_offset, char *err, size_t errsz)
{
        char part[16], n[24];
        const char *params[4] = {ns, topic, part, n};
        snprintf(part, sizeof(part), "%" PRId32, partition);
        snprintf(n, sizeof(n), "%" PRId64, next_offset);
        return store_query(s,
                   "DELETE FROM dedupd.attempts WHERE namespace = $1 AND topic = $2"
                   " AND partition = $3::int AND until_offset <= $4::bigint",
                   4, params, NULL, err, errsz);
}
