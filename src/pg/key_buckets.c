/* key_buckets: dedupd.keys_p's partitions — made ahead, listed, dropped whole — and which layout holds a namespace's keys (pg/key_buckets.h). */
#include "pg/key_buckets.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* A day number as the statements take it. */
static void day_text(char *buf, size_t sz, int64_t day) { snprintf(buf, sz, "%" PRId64, day); }

static int64_t field_day(const PGresult *r, int row, int col)
{
        return PQgetisnull(r, row, col) ? KEY_BUCKET_NONE : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

enum store_rc store_key_buckets_ensure(struct store *s, const char *ns, int64_t from, int64_t to, int64_t width,
                                       int *created, char *err, size_t errsz)
{
        char f[24], t[24], w[24];
        PGresult *r = NULL;
        day_text(f, sizeof(f), from);
        day_text(t, sizeof(t), to);
        day_text(w, sizeof(w), width);
        const char *params[4] = {ns, f, t, w};
        /* The ones never made (nor dropped) only: a bucket dropped stays so. */
        enum store_rc rc = store_query(
                s,
                "SELECT count(*) FILTER (WHERE dedupd.key_partition_create($1, b, b + $4::int))"
                " FROM (SELECT date '1970-01-01' + d AS b FROM generate_series($2::int, $3::int, $4::int) d) g"
                " WHERE NOT EXISTS (SELECT 1 FROM dedupd.key_partitions p WHERE p.namespace = $1 AND p.bucket = g.b)",
                4, params, &r, err, errsz);
        if (rc)
                return rc;
        *created = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_key_buckets_dropped_until(struct store *s, const char *ns, int64_t *until, char *err, size_t errsz)
{
        PGresult *r = NULL;
        const char *params[1] = {ns};
        enum store_rc rc = store_query(s,
                                       "SELECT max(until) - date '1970-01-01' FROM dedupd.key_partitions"
                                       " WHERE namespace = $1 AND dropped_at IS NOT NULL",
                                       1, params, &r, err, errsz);
        if (rc)
                return rc;
        *until = field_day(r, 0, 0);
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_key_buckets_ended(struct store *s, const char *ns, int64_t before, int64_t *days, size_t max,
                                      size_t *n, char *err, size_t errsz)
{
        char b[24], m[24];
        PGresult *r = NULL;
        day_text(b, sizeof(b), before);
        snprintf(m, sizeof(m), "%zu", max);
        const char *params[3] = {ns, b, m};
        enum store_rc rc = store_query(s,
                                       "SELECT bucket - date '1970-01-01' FROM dedupd.key_partitions"
                                       " WHERE namespace = $1 AND dropped_at IS NULL"
                                       " AND until <= date '1970-01-01' + $2::int ORDER BY bucket LIMIT $3::int",
                                       3, params, &r, err, errsz);
        *n = 0;
        if (rc)
                return rc;
        for (int i = 0; i < PQntuples(r) && *n < max; i++)
                days[(*n)++] = field_day(r, i, 0);
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_key_buckets_drop(struct store *s, const char *ns, int64_t day, int64_t *rows, char *err,
                                     size_t errsz)
{
        char d[24];
        PGresult *r = NULL;
        day_text(d, sizeof(d), day);
        const char *params[2] = {ns, d};
        enum store_rc rc = store_query(s, "SELECT dedupd.key_partition_drop($1, date '1970-01-01' + $2::int)", 2,
                                       params, &r, err, errsz);
        if (rc)
                return rc;
        *rows = PQgetisnull(r, 0, 0) ? -1 : strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_key_buckets_summary(struct store *s, const char *ns, struct key_buckets_summary *sum, char *err,
                                        size_t errsz)
{
        PGresult *r = NULL;
        const char *params[1] = {ns};
        enum store_rc rc =
                store_query(s,
                            "SELECT count(*) FILTER (WHERE dropped_at IS NULL),"
                            " min(bucket) FILTER (WHERE dropped_at IS NULL) - date '1970-01-01',"
                            " max(bucket) FILTER (WHERE dropped_at IS NULL) - date '1970-01-01',"
                            " coalesce(sum(pg_total_relation_size(to_regclass(format('dedupd.%I', relname))))"
                            "  FILTER (WHERE dropped_at IS NULL), 0),"
                            " count(*) FILTER (WHERE dropped_at IS NOT NULL), coalesce(sum(rows_dropped), 0)"
                            " FROM dedupd.key_partitions WHERE namespace = $1",
                            1, params, &r, err, errsz);
        if (rc)
                return rc;
        *sum = (struct key_buckets_summary){.live = strtoll(PQgetvalue(r, 0, 0), NULL, 10),
                                            .oldest = field_day(r, 0, 1),
                                            .newest = field_day(r, 0, 2),
                                            .bytes = strtoll(PQgetvalue(r, 0, 3), NULL, 10),
                                            .dropped = strtoll(PQgetvalue(r, 0, 4), NULL, 10),
                                            .dropped_rows = strtoll(PQgetvalue(r, 0, 5), NULL, 10)};
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_keys_in_other_layout(struct store *s, const char *ns, int partitioned, int *found, char *err,
                                         size_t errsz)
{
        PGresult *r = NULL;
        const char *params[1] = {ns};
        /* Both tables by name, whichever is in use. */
        enum store_rc rc =
                store_query_as_written(s,
                                       partitioned ? "SELECT EXISTS (SELECT 1 FROM dedupd.keys WHERE namespace = $1)"
                                                   : "SELECT EXISTS (SELECT 1 FROM dedupd.keys_p WHERE namespace = $1)",
                                       1, params, &r, err, errsz);
        if (rc)
                return rc;
        *found = PQgetvalue(r, 0, 0)[0] == 't';
        PQclear(r);
        return STORE_OK;
}
