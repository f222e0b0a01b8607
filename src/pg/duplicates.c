/* duplicates: where absorbed duplicates come from — the sampled ones written after their batches committed, the report dedupctl dupes prints, and the continuous absorption check's sample. */
#include "pg/duplicates.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "pg/array.h"
#include "pg/evidence.h"

/* $1 namespace, $2..$6 the rows' keys, topics, partitions, offsets,
 * sources. The first delivery is the key's row (committed: the duplicate's
 * batch has). */
static const char *const sql_note =
        "INSERT INTO dedupd.duplicates (namespace, topic, idem_key, partition, \"offset\", origin, first_topic,"
        " first_partition, first_offset, source, delay_ms)"
        " SELECT $1, d.topic, d.idem_key, d.partition, d.off,"
        " CASE WHEN k.topic = d.topic AND k.partition = d.partition AND k.\"offset\" = d.off THEN 'redelivery'"
        " WHEN k.topic = d.topic AND k.partition = d.partition THEN 'same-partition'"
        " WHEN k.topic = d.topic THEN 'other-partition' ELSE 'other-topic' END,"
        " k.topic, k.partition, k.\"offset\", d.source,"
        " greatest(0, (extract(epoch FROM clock_timestamp() - k.created_at) * 1000)::bigint)"
        " FROM unnest($2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[])"
        " AS d(idem_key, topic, partition, off, source)"
        " JOIN dedupd.keys k ON k.namespace = $1 AND k.idem_key = d.idem_key"
        " RETURNING topic, origin, source, delay_ms";

enum store_rc store_note_duplicates(struct store *s, const char *ns, const struct store_dup_row *rows, size_t n,
                                    store_dup_seen_fn seen, void *opaque, char *err, size_t errsz)
{
        struct store_array a[5] = {0};
        PGresult *r = NULL;
        if (!n)
                return STORE_OK;
        for (size_t i = 0; i < n; i++) {
                store_array_text(&a[0], rows[i].key);
                store_array_text(&a[1], rows[i].topic);
                store_array_int(&a[2], rows[i].partition);
                store_array_int(&a[3], rows[i].offset);
                store_array_text(&a[4], rows[i].source);
        }
        const char *params[6] = {ns};
        for (int i = 0; i < 5; i++)
                params[i + 1] = store_array_finish(&a[i]);
        enum store_rc rc = store_query(s, sql_note, 6, params, &r, err, errsz);
        for (int i = 0; i < 5; i++)
                store_array_free(&a[i]);
        if (rc)
                return rc;
        for (int i = 0; seen && i < PQntuples(r); i++)
                seen(opaque, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
                     PQgetisnull(r, i, 2) ? NULL : PQgetvalue(r, i, 2), strtoll(PQgetvalue(r, i, 3), NULL, 10));
        PQclear(r);
        return STORE_OK;
}

/* $1 namespace, $2 since (epoch ms), $3 topic ("" every one), $4 limit. */
#define DUP_WHERE                                                                                                      \
        " FROM dedupd.duplicates WHERE namespace = $1 AND seen_at >= to_timestamp($2::bigint / 1000.0)"                \
        " AND ($3 = '' OR topic = $3)"
#define MS_AT(P) "coalesce(percentile_disc(" P ") WITHIN GROUP (ORDER BY delay_ms), 0)"
static const char *const sql_report[DUP_REPORTS] = {
        [DUP_TOTAL] =
                "SELECT count(*),"
                " coalesce(to_char(min(seen_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), ''),"
                " coalesce(to_char(max(seen_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), '')" DUP_WHERE
                " AND $4::int > 0",
        [DUP_BY_ORIGIN] = "SELECT origin, count(*) AS sampled, " MS_AT("0.5") " AS delay_p50_ms, " MS_AT(
                "0.99") " AS delay_p99_ms, max(delay_ms) AS delay_max_ms" DUP_WHERE
                        " GROUP BY origin ORDER BY count(*) DESC, origin LIMIT $4::int",
        [DUP_BY_SOURCE] = "SELECT coalesce(source, '(none)') AS source, count(*) AS sampled,"
                          " count(*) FILTER (WHERE origin = 'redelivery') AS redelivery,"
                          " count(*) FILTER (WHERE origin = 'same-partition') AS same_partition,"
                          " count(*) FILTER (WHERE origin = 'other-partition') AS other_partition,"
                          " count(*) FILTER (WHERE origin = 'other-topic') AS other_topic" DUP_WHERE
                          " GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT $4::int",
        [DUP_BY_PLACE] = "SELECT topic, partition, count(*) AS sampled, count(DISTINCT idem_key) AS keys, " MS_AT(
                "0.5") " AS delay_p50_ms" DUP_WHERE
                       " GROUP BY topic, partition ORDER BY count(*) DESC, topic, partition LIMIT $4::int",
};

enum store_rc store_dup_report(struct store *s, const char *ns, int64_t since_ms, const char *topic, int limit,
                               enum store_dup_report what, PGresult **out, char *err, size_t errsz)
{
        char since[24], lim[16];
        snprintf(since, sizeof(since), "%" PRId64, since_ms);
        snprintf(lim, sizeof(lim), "%d", limit);
        const char *params[4] = {ns, since, topic ? topic : "", lim};
        return store_query(s, sql_report[what], 4, params, out, err, errsz);
}

/* The check's statement for evidence table T(key column K), both quoted;
 * $1 namespace, $2 topic, $3 sample. A violation is what dedupctl verify
 * reports (pg/audit.c): a DONE key with no effect or more than one (plus
 * one per audited re-run), a FAILED key with one. */
#define VIOLATION "(status = 'DONE' AND (effects = 0 OR effects > 1 + reruns)) OR (status = 'FAILED' AND effects > 0)"
static char *absorption_sql(const char *t, const char *k)
{
        return xasprintf(
                "WITH s AS (SELECT k.idem_key, k.status FROM dedupd.keys k TABLESAMPLE SYSTEM ("
                /* the table's rows, or under keys.layout: partitioned its partitions' */
                " (SELECT least(100, 100.0 * 2 * $3::int / greatest(sum(c.reltuples) FILTER (WHERE c.reltuples > 0),"
                "  1)) FROM pg_class c WHERE c.oid = 'dedupd.keys'::regclass"
                "  OR c.oid IN (SELECT relid FROM pg_partition_tree('dedupd.keys'::regclass))))"
                " WHERE k.namespace = $1 AND k.topic = $2 AND k.status IN ('DONE', 'FAILED') LIMIT $3::int),"
                " e AS (SELECT s.idem_key, s.status, (SELECT count(*) FROM %1$s x WHERE x.%2$s = s.idem_key) AS "
                "effects,"
                " (SELECT count(*) FROM dedupd.reruns r WHERE r.namespace = $1 AND r.idem_key = s.idem_key"
                "  AND r.mode = 'reexecute') AS reruns FROM s)"
                " SELECT count(*), count(*) FILTER (WHERE status = 'DONE'), coalesce(sum(effects), 0),"
                " count(*) FILTER (WHERE " VIOLATION "),"
                " coalesce(array_to_string((array_agg(idem_key || ' (' || status || ', ' || effects || ' effect'"
                " || CASE WHEN effects = 1 THEN '' ELSE 's' END || ')' ORDER BY idem_key)"
                " FILTER (WHERE " VIOLATION "))[1:3], ', '), '')"
                " FROM e",
                t, k);
}

enum store_rc store_absorption_sample(struct store *s, const char *ns, const char *topic, const char *table,
                                      const char *key_column, int sample, struct store_absorption *out, char *err,
                                      size_t errsz)
{
        char *t = store_evidence_quote(s, table);
        char *k = PQescapeIdentifier(store_conn(s), key_column, strlen(key_column));
        char n[16];
        PGresult *r = NULL;
        enum store_rc rc = STORE_ERROR;
        memset(out, 0, sizeof(*out));
        if (!t || !k) {
                snprintf(err, errsz, "cannot quote the evidence table %s(%s)", table, key_column);
                goto done;
        }
        snprintf(n, sizeof(n), "%d", sample);
        const char *params[3] = {ns, topic, n};
        char *sql = absorption_sql(t, k);
        rc = store_query(s, sql, 3, params, &r, err, errsz);
        free(sql);
        if (rc)
                goto done;
        out->keys = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        out->done = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        out->effects = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
        out->violations = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
        snprintf(out->examples, sizeof(out->examples), "%s", PQgetvalue(r, 0, 4));
        PQclear(r);
done:
        free(t);
        if (k)
                PQfreemem(k);
        return rc;
}
