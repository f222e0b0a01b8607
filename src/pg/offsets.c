/* offsets: each partition's position and counters in dedupd.offsets and dedupd.progress_log. */
#include "pg/offsets.h"

#include "base/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg/array.h"

/*
 * A batch's progress is written from struct store_progress through this one
 * table: each row names a column of the statement's unnest(), its type, the
 * field it comes from and the tables it is written to (own_next only guards
 * the write). The unnest, the column lists and the parameters all follow it.
 */
enum col_kind { COL_TEXT, COL_INT };
enum { TO_LOG = 1, TO_OFFSETS = 2, TO_BOTH = 3 };
static const struct progress_col {
        const char *name, *type;
        size_t off;
        enum col_kind kind;
        int to;      /* TO_LOG: dedupd.progress_log, TO_OFFSETS: dedupd.offsets; 0: neither */
        int counter; /* added up in dedupd.offsets */
} progress_cols[] = {
        {"topic", "text", offsetof(struct store_progress, topic), COL_TEXT, TO_BOTH, 0},
        {"partition", "int", offsetof(struct store_progress, partition), COL_INT, TO_BOTH, 0},
        {"from_offset", "bigint", offsetof(struct store_progress, from_offset), COL_INT, TO_LOG, 0},
        {"next_offset", "bigint", offsetof(struct store_progress, next_offset), COL_INT, TO_BOTH, 0},
        {"consumed", "bigint", offsetof(struct store_progress, consumed), COL_INT, TO_BOTH, 1},
        {"applied", "bigint", offsetof(struct store_progress, applied), COL_INT, TO_BOTH, 1},
        {"rejected", "bigint", offsetof(struct store_progress, rejected), COL_INT, TO_BOTH, 1},
        {"duplicates", "bigint", offsetof(struct store_progress, duplicates), COL_INT, TO_BOTH, 1},
        {"dead_lettered", "bigint", offsetof(struct store_progress, dead_lettered), COL_INT, TO_BOTH, 1},
        {"mismatches", "bigint", offsetof(struct store_progress, mismatches), COL_INT, TO_BOTH, 1},
        {"own_next", "bigint", offsetof(struct store_progress, own_next), COL_INT, 0, 0},
};
#define PROGRESS_COLS (sizeof(progress_cols) / sizeof(progress_cols[0]))

static int64_t col_int(const struct store_progress *p, const struct progress_col *c)
{
        if (!strcmp(c->type, "int"))
                return *(const int32_t *)((const char *)p + c->off);
        return *(const int64_t *)((const char *)p + c->off);
}

/* Append to sql: each column name (with prefix), comma-separated: those
 * written to `to`, or (to 0) every column of the unnest. */
static size_t col_list(char *sql, size_t at, size_t sz, const char *prefix, int to)
{
        for (size_t i = 0, n = 0; i < PROGRESS_COLS; i++) {
                if (to && !(progress_cols[i].to & to))
                        continue;
                at += (size_t)snprintf(sql + at, sz - at, "%s%s%s", n++ ? ", " : "", prefix, progress_cols[i].name);
        }
        return at;
}

/*
 * The statement, built once from the table. Sorted by partition so concurrent
 * owners (a zombie and its successor) lock rows in the same order. GREATEST:
 * never backwards.
 *
 * And never past a gap: `behind` finds the partitions whose stored position
 * is below what this process itself committed for them (own_next; -1: it
 * committed nothing since it was positioned) or that have no row at all —
 * the database changed under dedupd (a promoted replica that lost the last
 * commits, a restore). Then nothing is written and those rows come back.
 * The read needs no lock: this process's own COMMIT came before this
 * statement's snapshot, and a stored position only moves up but by such a
 * change, so a snapshot that shows it lower is the truth.
 */
static const char *progress_sql(void)
{
        static char sql[4096];
        size_t at = 0, sz = sizeof(sql);
        if (sql[0])
                return sql;
        at += (size_t)snprintf(sql + at, sz - at, "WITH u AS (SELECT * FROM unnest(");
        for (size_t i = 0; i < PROGRESS_COLS; i++)
                at += (size_t)snprintf(sql + at, sz - at, "%s$%zu::%s[]", i ? ", " : "", i + 2, progress_cols[i].type);
        at += (size_t)snprintf(sql + at, sz - at, ") AS u(");
        at = col_list(sql, at, sz, "", 0);
        at += (size_t)snprintf(sql + at, sz - at,
                               ")), behind AS (SELECT u.partition, coalesce(o.next_offset, -1) AS stored, u.own_next"
                               " FROM u LEFT JOIN dedupd.offsets o ON o.namespace = $1 AND o.topic = u.topic"
                               " AND o.partition = u.partition"
                               " WHERE u.own_next >= 0 AND coalesce(o.next_offset, -1) < u.own_next),"
                               " log AS (INSERT INTO dedupd.progress_log (namespace, ");
        at = col_list(sql, at, sz, "", TO_LOG);
        at += (size_t)snprintf(sql + at, sz - at, ") SELECT $1, ");
        at = col_list(sql, at, sz, "u.", TO_LOG);
        at += (size_t)snprintf(sql + at, sz - at,
                               " FROM u WHERE NOT EXISTS (SELECT 1 FROM behind)),"
                               " up AS (INSERT INTO dedupd.offsets AS o (namespace, ");
        at = col_list(sql, at, sz, "", TO_OFFSETS);
        at += (size_t)snprintf(sql + at, sz - at, ") SELECT $1, ");
        at = col_list(sql, at, sz, "u.", TO_OFFSETS);
        at += (size_t)snprintf(sql + at, sz - at,
                               " FROM u WHERE NOT EXISTS (SELECT 1 FROM behind) ORDER BY u.topic, u.partition"
                               " ON CONFLICT (namespace, topic, partition)"
                               " DO UPDATE SET next_offset = GREATEST(o.next_offset, EXCLUDED.next_offset)");
        for (size_t i = 0; i < PROGRESS_COLS; i++)
                if (progress_cols[i].counter)
                        at += (size_t)snprintf(sql + at, sz - at, ", %s = o.%s + EXCLUDED.%s", progress_cols[i].name,
                                               progress_cols[i].name, progress_cols[i].name);
        snprintf(sql + at, sz - at,
                 ", updated_at = now()) SELECT partition, stored, own_next FROM behind"
                 " ORDER BY partition");
        return sql;
}

/* The first partition the statement found behind, in words (a stored
 * position and an own one, both read back as the integers they were). */
static void read_behind(PGresult *r, struct store_behind *behind)
{
        memset(behind, 0, sizeof(*behind));
        behind->count = (size_t)PQntuples(r);
        if (!behind->count)
                return;
        behind->partition = (int32_t)strtol(PQgetvalue(r, 0, 0), NULL, 10);
        behind->stored = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        behind->own = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
}

enum store_rc store_progress(struct store *s, const char *ns, size_t n, const struct store_progress *p,
                             struct store_behind *behind, char *err, size_t errsz)
{
        struct store_array a[PROGRESS_COLS];
        const char *params[PROGRESS_COLS + 1] = {ns};
        PGresult *r = NULL;
        enum store_rc rc;

        memset(behind, 0, sizeof(*behind));
        if (n == 0)
                return STORE_OK;
        memset(a, 0, sizeof(a));
        for (size_t i = 0; i < n; i++)
                for (size_t c = 0; c < PROGRESS_COLS; c++) {
                        if (progress_cols[c].kind == COL_TEXT)
                                store_array_text(&a[c],
                                                 *(const char *const *)((const char *)&p[i] + progress_cols[c].off));
                        else
                                store_array_int(&a[c], col_int(&p[i], &progress_cols[c]));
                }
        for (size_t c = 0; c < PROGRESS_COLS; c++)
                params[c + 1] = store_array_finish(&a[c]);
        rc = store_query_hot(s, progress_sql(), (int)PROGRESS_COLS + 1, params, &r, err, errsz);
        for (size_t c = 0; c < PROGRESS_COLS; c++)
                store_array_free(&a[c]);
        if (rc == STORE_OK) {
                read_behind(r, behind);
                PQclear(r);
        }
        return rc;
}

enum store_rc store_positions(struct store *s, const char *ns, const char *topic, struct store_position **out,
                              size_t *n, char *err, size_t errsz)
{
        PGresult *r = NULL;
        const char *params[2] = {ns, topic};
        enum store_rc rc;

        *out = NULL;
        *n = 0;
        rc = store_query(s, "SELECT partition, next_offset FROM dedupd.offsets WHERE namespace = $1 AND topic = $2", 2,
                         params, &r, err, errsz);
        if (rc == STORE_UNDEFINED)
                return STORE_OK; /* a database that never saw dedupd has no positions */
        if (rc)
                return rc;
        *n = (size_t)PQntuples(r);
        *out = xcalloc(*n ? *n : 1, sizeof(**out));
        for (size_t i = 0; i < *n; i++)
                (*out)[i] = (struct store_position){(int32_t)atoi(PQgetvalue(r, (int)i, 0)),
                                                    strtoll(PQgetvalue(r, (int)i, 1), NULL, 10)};
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_offsets_get(struct store *s, const char *ns, const char *topic, size_t n, const int32_t *parts,
                                int64_t *out, char *err, size_t errsz)
{
        struct store_position *pos = NULL;
        size_t npos = 0;
        enum store_rc rc = store_positions(s, ns, topic, &pos, &npos, err, errsz);

        for (size_t i = 0; i < n; i++) {
                out[i] = -1;
                for (size_t k = 0; k < npos; k++)
                        if (pos[k].partition == parts[i])
                                out[i] = pos[k].next_offset;
        }
        free(pos);
        return rc;
}

enum store_rc store_offsets_set(struct store *s, const char *ns, const char *topic, size_t n, const int32_t *parts,
                                const int64_t *next, char *err, size_t errsz)
{
        struct store_array pa = {0}, oa = {0};
        enum store_rc rc;

        for (size_t i = 0; i < n; i++) {
                store_array_int(&pa, parts[i]);
                store_array_int(&oa, next[i]);
        }
        const char *params[4] = {ns, topic, store_array_finish(&pa), store_array_finish(&oa)};
        /* Setting next_offset directly: moving backwards is the point here;
         * the parallel workers' positions go (they would move it up again). */
        rc = store_query(s,
                         "WITH w AS (DELETE FROM dedupd.parallel_positions WHERE namespace = $1 AND topic = $2"
                         " AND partition = ANY($3::int[]))"
                         " INSERT INTO dedupd.offsets AS o (namespace, topic, partition, next_offset)"
                         " SELECT $1, $2, u.p, u.o FROM unnest($3::int[], $4::bigint[]) AS u(p, o)"
                         " ORDER BY u.p"
                         " ON CONFLICT (namespace, topic, partition) DO UPDATE SET"
                         " next_offset = EXCLUDED.next_offset, updated_at = now()",
                         4, params, NULL, err, errsz);
        store_array_free(&pa);
        store_array_free(&oa);
        return rc;
}

/* A row moves from exactly `from` (where the source proved the gap starts)
 * to `to`; with from -1 a row is only created where none is: anything else
 * means the database is not where the source started (another owner, a
 * failover, a replay), and nothing moves. */
static const char *const skip_sql =
        "WITH u AS (SELECT * FROM unnest($3::int[], $4::bigint[], $5::bigint[]) AS u(p, f, t) WHERE u.t > u.f),"
        " up AS (UPDATE dedupd.offsets o SET next_offset = u.t, updated_at = now() FROM u"
        "  WHERE o.namespace = $1 AND o.topic = $2 AND o.partition = u.p AND u.f >= 0 AND o.next_offset = u.f"
        "  RETURNING o.partition),"
        " ins AS (INSERT INTO dedupd.offsets (namespace, topic, partition, next_offset)"
        "  SELECT $1, $2, u.p, u.t FROM u WHERE u.f < 0 ORDER BY u.p"
        "  ON CONFLICT (namespace, topic, partition) DO NOTHING RETURNING partition)"
        " SELECT partition FROM up UNION ALL SELECT partition FROM ins";

enum store_rc store_offsets_skip(struct store *s, const char *ns, const char *topic, size_t n, const int32_t *parts,
                                 const int64_t *from, const int64_t *to, int *moved, char *err, size_t errsz)
{
        struct store_array pa = {0}, fa = {0}, ta = {0};
        PGresult *r = NULL;
        enum store_rc rc;

        for (size_t i = 0; i < n; i++) {
                moved[i] = 0;
                store_array_int(&pa, parts[i]);
                store_array_int(&fa, from[i]);
                store_array_int(&ta, to[i]);
        }
        const char *params[5] = {ns, topic, store_array_finish(&pa), store_array_finish(&fa), store_array_finish(&ta)};
        rc = store_query(s, skip_sql, 5, params, &r, err, errsz);
        store_array_free(&pa);
        store_array_free(&fa);
        store_array_free(&ta);
        if (rc)
                return rc;
        for (int row = 0; row < PQntuples(r); row++) {
                int32_t p = (int32_t)atoi(PQgetvalue(r, row, 0));
                for (size_t i = 0; i < n; i++)
                        if (parts[i] == p)
                                moved[i] = 1;
        }
        PQclear(r);
        return STORE_OK;
}
