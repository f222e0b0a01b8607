/* attempts: the crash-loop ledger in dedupd.attempts — batch starts that never committed, each row its owner's. */
#include "pg/attempts.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "pg/instances.h"

/* A row that counts as a crash: not mine, and its owner is no longer live. */
#define CRASHED(a) a ".owner <> $5 AND NOT " STORE_INSTANCE_LIVE(a ".owner")

/* The ledger row's key columns and the owner as text parameters, in the
 * order every statement here takes them: $1 namespace, $2 topic, $3
 * partition, $4 offset, $5 me, $6 extra. */
struct attempt_params {
        char part[16], offset[24], extra[24];
        const char *v[6];
};

static void attempt_params(struct attempt_params *ap, const char *ns, const char *topic, int32_t partition,
                           int64_t offset, const char *me, int64_t extra)
{
        snprintf(ap->part, sizeof(ap->part), "%" PRId32, partition);
        snprintf(ap->offset, sizeof(ap->offset), "%" PRId64, offset);
        snprintf(ap->extra, sizeof(ap->extra), "%" PRId64, extra);
        ap->v[0] = ns;
        ap->v[1] = topic;
        ap->v[2] = ap->part;
        ap->v[3] = ap->offset;
        ap->v[4] = me;
        ap->v[5] = ap->extra;
}

enum store_rc store_attempt_covering(struct store *s, const char *ns, const char *topic, int32_t partition,
                                     int64_t offset, const char *me, struct store_crashes *out, char *err, size_t errsz)
{
        struct attempt_params ap;
        PGresult *r = NULL;
        enum store_rc rc;

        attempt_params(&ap, ns, topic, partition, offset, me, 0);
        rc = store_query(
                s,
                "SELECT coalesce(sum(attempts) FILTER (WHERE NOT live), 0),"
                " coalesce(max(until_offset) FILTER (WHERE NOT live), 0),"
                " left(coalesce(string_agg(DISTINCT CASE owner WHEN '' THEN 'an earlier dedupd' ELSE owner END, ', ')"
                " FILTER (WHERE NOT live), ''), 200),"
                " count(DISTINCT owner) FILTER (WHERE live),"
                " left(coalesce(string_agg(DISTINCT owner, ', ') FILTER (WHERE live), ''), 200)"
                " FROM (SELECT a.attempts, a.until_offset, a.owner, " STORE_INSTANCE_LIVE(
                        "a.owner") " AS live"
                                   " FROM dedupd.attempts a"
                                   " WHERE a.namespace = $1 AND a.topic = $2 AND a.partition = $3::int AND NOT a.single"
                                   " AND a.\"offset\" <= $4::bigint AND a.until_offset > $4::bigint AND a.owner <> $5) "
                                   "c",
                5, ap.v, &r, err, errsz);
        if (rc)
                return rc;
        out->crashes = atoi(PQgetvalue(r, 0, 0));
        out->until = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        snprintf(out->owners, sizeof(out->owners), "%s", PQgetvalue(r, 0, 2));
        out->live = atoi(PQgetvalue(r, 0, 3));
        snprintf(out->live_owners, sizeof(out->live_owners), "%s", PQgetvalue(r, 0, 4));
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_attempt_batch(struct store *s, const char *ns, const char *topic, int32_t partition, int64_t from,
                                  int64_t until, const char *me, char *err, size_t errsz)
{
        struct attempt_params ap;

        attempt_params(&ap, ns, topic, partition, from, me, until);
        /* Autocommit: the count must survive the crash it is counting. */
        return store_query(s,
                           "INSERT INTO dedupd.attempts AS a (namespace, topic, partition, \"offset\", owner, single,"
                           " until_offset)"
                           " VALUES ($1, $2, $3::int, $4::bigint, $5, false, $6::bigint)"
                           " ON CONFLICT (namespace, topic, partition, \"offset\", single, owner) DO UPDATE SET"
                           " attempts = a.attempts + 1, last_at = now(),"
                           " until_offset = GREATEST(a.until_offset, EXCLUDED.until_offset)",
                           6, ap.v, NULL, err, errsz);
}

enum store_rc store_attempt_single(struct store *s, const char *ns, const char *topic, int32_t partition,
                                   int64_t offset, int inherited, const char *me, int *attempts, int *inherited_out,
                                   char *err, size_t errsz)
{
        struct attempt_params ap;
        PGresult *r = NULL;
        enum store_rc rc;

        attempt_params(&ap, ns, topic, partition, offset, me, inherited);
        /* The crashed starts of earlier owners move into my row, in the same
         * statement: two takers cannot both get them (the DELETE locks). */
        rc = store_query(
                s,
                "WITH dead AS (DELETE FROM dedupd.attempts d"
                " WHERE d.namespace = $1 AND d.topic = $2 AND d.partition = $3::int AND d.\"offset\" = $4::bigint"
                " AND d.single AND " CRASHED(
                        "d") " RETURNING d.attempts, d.inherited)"
                             " INSERT INTO dedupd.attempts AS a (namespace, topic, partition, \"offset\", owner, "
                             "single,"
                             " until_offset, attempts, inherited)"
                             " SELECT $1, $2, $3::int, $4::bigint, $5, true, $4::bigint + 1,"
                             " 1 + coalesce(sum(attempts), 0), GREATEST($6::int, coalesce(max(inherited), 0)) FROM dead"
                             " ON CONFLICT (namespace, topic, partition, \"offset\", single, owner) DO UPDATE SET"
                             " attempts = a.attempts + EXCLUDED.attempts, last_at = now(),"
                             " inherited = GREATEST(a.inherited, EXCLUDED.inherited)"
                             " RETURNING attempts, inherited",
                6, ap.v, &r, err, errsz);
        if (rc)
                return rc;
        *attempts = atoi(PQgetvalue(r, 0, 0));
        *inherited_out = atoi(PQgetvalue(r, 0, 1));
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_attempt_release(struct store *s, const char *ns, const char *topic, int32_t partition,
                                    int64_t offset, int single, const char *me, char *err, size_t errsz)
{
        struct attempt_params ap;

        attempt_params(&ap, ns, topic, partition, offset, me, single);
        /* The last start goes with its row: one statement, on disjoint rows. */
        return store_query(s,
                           "WITH gone AS (DELETE FROM dedupd.attempts"
                           " WHERE namespace = $1 AND topic = $2 AND partition = $3::int AND \"offset\" = $4::bigint"
                           " AND owner = $5 AND single = ($6::int <> 0) AND attempts <= 1)"
                           " UPDATE dedupd.attempts SET attempts = attempts - 1"
                           " WHERE namespace = $1 AND topic = $2 AND partition = $3::int AND \"offset\" = $4::bigint"
                           " AND owner = $5 AND single = ($6::int <> 0) AND attempts > 1",
                           6, ap.v, NULL, err, errsz);
}

enum store_rc store_attempts_done(struct store *s, const char *ns, const char *topic, int32_t partition,
                                  int64_t next_offset, const char *me, char *err, size_t errsz)
{
        struct attempt_params ap;

        attempt_params(&ap, ns, topic, partition, next_offset, me, 0);
        return store_query(s,
                           "DELETE FROM dedupd.attempts a WHERE a.namespace = $1 AND a.topic = $2"
                           " AND a.partition = $3::int AND a.until_offset <= $4::bigint"
                           " AND (a.owner = $5 OR NOT " STORE_INSTANCE_LIVE("a.owner") ")",
                           5, ap.v, NULL, err, errsz);
}
