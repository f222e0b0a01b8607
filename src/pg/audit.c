/* audit: what dedupctl reads to audit and report — a key's record, keys by status, counters, keys in doubt, a handler's evidence, the fingerprint mismatches. */
#include "pg/audit.h"

#include "base/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg/array.h"
#include "pg/evidence.h"

enum store_rc store_relation_exists(struct store *s, const char *name, int *exists, char *err, size_t errsz)
{
        const char *params[1] = {name};
        PGresult *r = NULL;
        enum store_rc rc = store_query(s, "SELECT to_regclass($1) IS NOT NULL", 1, params, &r, err, errsz);
        if (rc)
                return rc;
        *exists = !strcmp(PQgetvalue(r, 0, 0), "t");
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_audit_key(struct store *s, const char *ns, const char *key, PGresult **out, char *err, size_t errsz)
{
        const char *params[2] = {ns, key};
        return store_query(s,
                           "SELECT namespace, idem_key, key_text, status, response, attempts, topic, partition,"
                           " \"offset\", encode(fingerprint, 'hex') AS fingerprint, created_at,"
                           " updated_at, expires_at, response_expires_at FROM dedupd.keys"
                           " WHERE namespace = $1 AND idem_key = $2",
                           2, params, out, err, errsz);
}

enum store_rc store_audit_statuses(struct store *s, const char *ns, PGresult **out, char *err, size_t errsz)
{
        const char *params[1] = {ns};
        return store_query(s,
                           "SELECT status, count(*) AS keys FROM dedupd.keys WHERE namespace = $1"
                           " GROUP BY status ORDER BY status",
                           1, params, out, err, errsz);
}

enum store_rc store_audit_partitions(struct store *s, const char *ns, PGresult **out, char *err, size_t errsz)
{
        const char *params[1] = {ns};
        return store_query(s,
                           "SELECT topic, partition, next_offset, consumed, applied, rejected, duplicates,"
                           " dead_lettered, mismatches, updated_at FROM dedupd.offsets WHERE namespace = $1"
                           " ORDER BY topic, partition",
                           1, params, out, err, errsz);
}

enum store_rc store_audit_in_doubt(struct store *s, const char *ns, PGresult **out, char *err, size_t errsz)
{
        const char *params[1] = {ns};
        /* In doubt: in transactional mode nobody should ever see PENDING. */
        return store_query(s,
                           "SELECT idem_key, status, topic, partition, \"offset\","
                           " to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
                           " FROM dedupd.keys WHERE namespace = $1 AND (status = 'EXPIRED'"
                           " OR (status = 'PENDING' AND updated_at < now() - interval '10 minutes'))"
                           " ORDER BY status, idem_key",
                           1, params, out, err, errsz);
}

enum store_rc store_audit_counters(struct store *s, const char *ns, PGresult **out, char *err, size_t errsz)
{
        const char *params[1] = {ns};
        return store_query(s,
                           "SELECT coalesce(sum(consumed), 0), coalesce(sum(applied), 0),"
                           " coalesce(sum(rejected), 0), coalesce(sum(duplicates), 0),"
                           " coalesce(sum(dead_lettered), 0),"
                           " (SELECT count(*) FROM dedupd.keys WHERE namespace = $1 AND status = 'DONE'),"
                           " (SELECT count(*) FROM dedupd.keys WHERE namespace = $1 AND status = 'FAILED'),"
                           " (SELECT count(*) FROM dedupd.keys WHERE namespace = $1)"
                           " FROM dedupd.offsets WHERE namespace = $1",
                           1, params, out, err, errsz);
}

enum store_rc store_audit_since(struct store *s, const char *ns, int64_t since_ms, PGresult **out, char *err,
                                size_t errsz)
{
        char since[24];
        const char *params[2] = {ns, since};
        snprintf(since, sizeof(since), "%" PRId64, since_ms);
        return store_query(s,
                           "SELECT coalesce(sum(consumed), 0), coalesce(sum(applied), 0),"
                           " coalesce(sum(rejected), 0), coalesce(sum(duplicates), 0),"
                           " coalesce(sum(dead_lettered), 0), count(*),"
                           " to_char(to_timestamp($2::bigint / 1000.0) AT TIME ZONE 'UTC',"
                           " 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
                           " FROM dedupd.progress_log WHERE namespace = $1"
                           " AND committed_at >= to_timestamp($2::bigint / 1000.0)",
                           2, params, out, err, errsz);
}

/* The check's statement for table T(key column K), T and K already quoted;
 * $1 namespace, $2 the handler's topics. */
static char *evidence_sql(enum store_evidence_check check, const char *t, const char *k)
{
        char *sql = NULL;
        switch (check) {
        case EVIDENCE_TWO_EFFECTS: /* of this namespace, or of none */
                sql = xasprintf("SELECT e.%2$s, count(*), k.topic, k.partition, k.\"offset\" FROM %1$s e"
                                " LEFT JOIN dedupd.keys k ON k.namespace = $1 AND k.idem_key = e.%2$s"
                                " WHERE (k.idem_key IS NOT NULL OR NOT EXISTS"
                                " (SELECT 1 FROM dedupd.keys o WHERE o.idem_key = e.%2$s)) AND $2::text[] IS NOT NULL"
                                " GROUP BY e.%2$s, k.topic, k.partition, k.\"offset\""
                                /* one more effect per audited re-run (dedupctl rerun) */
                                " HAVING count(*) > 1 + (SELECT count(*) FROM dedupd.reruns r"
                                " WHERE r.namespace = $1 AND r.idem_key = e.%2$s AND r.mode = 'reexecute')"
                                " ORDER BY e.%2$s",
                                t, k);
                break;
        case EVIDENCE_DONE_WITHOUT:
                sql = xasprintf("SELECT k.idem_key, 0, k.topic, k.partition, k.\"offset\" FROM dedupd.keys k"
                                " WHERE k.namespace = $1 AND k.status = 'DONE' AND k.topic = ANY($2::text[])"
                                " AND NOT EXISTS (SELECT 1 FROM %1$s e WHERE e.%2$s = k.idem_key)"
                                " ORDER BY k.idem_key",
                                t, k);
                break;
        case EVIDENCE_FAILED_WITH:
                sql = xasprintf("SELECT k.idem_key, (SELECT count(*) FROM %1$s e WHERE e.%2$s = k.idem_key),"
                                " k.topic, k.partition, k.\"offset\" FROM dedupd.keys k"
                                " WHERE k.namespace = $1 AND k.status = 'FAILED' AND $2::text[] IS NOT NULL"
                                " AND EXISTS (SELECT 1 FROM %1$s e WHERE e.%2$s = k.idem_key)"
                                " ORDER BY k.idem_key",
                                t, k);
                break;
        }
        return sql;
}

enum store_rc store_audit_evidence(struct store *s, const char *ns, const char *table, const char *key_column,
                                   const char *const *topics, size_t ntopics, enum store_evidence_check check,
                                   PGresult **out, char *err, size_t errsz)
{
        struct store_array ta = {0};
        char *t = store_evidence_quote(s, table);
        char *k = PQescapeIdentifier(store_conn(s), key_column, strlen(key_column));
        enum store_rc rc = STORE_ERROR;

        if (!t || !k) {
                snprintf(err, errsz, "cannot quote the evidence table %s(%s)", table, key_column);
                goto out;
        }
        for (size_t i = 0; i < ntopics; i++)
                store_array_text(&ta, topics[i]);
        const char *params[2] = {ns, store_array_finish(&ta)};
        char *sql = evidence_sql(check, t, k);
        rc = store_query(s, sql, 2, params, out, err, errsz);
        free(sql);
out:
        free(t);
        PQfreemem(k);
        store_array_free(&ta);
        return rc;
}

enum store_rc store_mismatch_summary(struct store *s, const char *ns, int examples, PGresult **count, PGresult **rows,
                                     char *err, size_t errsz)
{
        char lim[16];
        enum store_rc rc;
        snprintf(lim, sizeof(lim), "%d", examples);
        const char *const v[] = {ns, lim};
        *count = *rows = NULL;
        if ((rc = store_query(s, "SELECT count(*) FROM dedupd.mismatches WHERE namespace = $1", 1, v, count, err,
                              errsz)))
                return rc;
        return store_query(s,
                           "SELECT idem_key, topic, partition, \"offset\", verdict || ' at ' ||"
                           " to_char(noticed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
                           " FROM dedupd.mismatches WHERE namespace = $1"
                           " ORDER BY noticed_at DESC, topic, partition, \"offset\" DESC LIMIT $2::int",
                           2, v, rows, err, errsz);
}
