/* parallel_positions: each parallel worker's position in dedupd.parallel_positions, and a partition's position recovered from them. */
#include "pg/parallel_positions.h"

#include <stdio.h>
#include <stdlib.h>

#include "pg/array.h"

static const char *const mark_sql =
        "INSERT INTO dedupd.parallel_positions AS w (namespace, topic, partition, layout, worker, next_offset)"
        " SELECT $1, $2, u.p, $3, $4::int, u.o FROM unnest($5::int[], $6::bigint[]) AS u(p, o) ORDER BY u.p"
        " ON CONFLICT (namespace, topic, partition, layout, worker) DO UPDATE SET"
        " next_offset = GREATEST(w.next_offset, EXCLUDED.next_offset), updated_at = now()";

enum store_rc store_parallel_mark(struct store *s, const char *ns, const char *topic, const char *layout, int worker,
                                  size_t n, const int32_t *parts, const int64_t *next, char *err, size_t errsz)
{
        struct store_array pa = {0}, oa = {0};
        char w[16];
        enum store_rc rc;
        if (!n)
                return STORE_OK;
        for (size_t i = 0; i < n; i++) {
                store_array_int(&pa, parts[i]);
                store_array_int(&oa, next[i]);
        }
        snprintf(w, sizeof(w), "%d", worker);
        const char *params[6] = {ns, topic, layout, w, store_array_finish(&pa), store_array_finish(&oa)};
        rc = store_query_hot(s, mark_sql, 6, params, NULL, err, errsz);
        store_array_free(&pa);
        store_array_free(&oa);
        return rc;
}

/* Only rows of this layout count: another worker count or key sends a
 * message to another worker, whose row says nothing of it. */
static const char *const resume_sql =
        "INSERT INTO dedupd.offsets AS o (namespace, topic, partition, next_offset)"
        " SELECT $1, $2, w.partition, min(w.next_offset) FROM dedupd.parallel_positions w"
        " WHERE w.namespace = $1 AND w.topic = $2 AND w.layout = $3 AND w.worker < $4::int"
        " GROUP BY w.partition HAVING count(*) = $4::int ORDER BY w.partition"
        " ON CONFLICT (namespace, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset,"
        " updated_at = now() WHERE o.next_offset < EXCLUDED.next_offset RETURNING o.partition";

enum store_rc store_parallel_resume(struct store *s, const char *ns, const char *topic, const char *layout, int workers,
                                    size_t *moved, char *err, size_t errsz)
{
        char w[16];
        PGresult *r = NULL;
        snprintf(w, sizeof(w), "%d", workers);
        const char *params[4] = {ns, topic, layout, w};
        enum store_rc rc = store_query(s, resume_sql, 4, params, &r, err, errsz);
        *moved = 0;
        if (rc)
                return rc;
        *moved = (size_t)PQntuples(r);
        PQclear(r);
        return STORE_OK;
}
