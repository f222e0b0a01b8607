/* reruns: the SQL behind dedupctl rerun — an operator's audited re-run of one key, and its history. */
#include "pg/reruns.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg/array.h"
#include "pg/tenants.h"

static const char *const mode_names[] = {"reexecute", "emit-only"};

/* The key's row, locked: *result says whether it may be re-run. */
static enum store_rc lock_key(struct store *s, const char *ns, const char *key, enum rerun_result *result,
                              struct rerun_info *info, char *err, size_t errsz)
{
        const char *params[2] = {ns, key};
        PGresult *r = NULL;
        enum store_rc rc =
                store_query(s,
                            "SELECT status, coalesce(topic, ''), coalesce(partition, -1),"
                            " coalesce(\"offset\", -1),"
                            " (SELECT count(*) + 1 FROM dedupd.reruns WHERE namespace = $1 AND idem_key = $2)"
                            " FROM dedupd.keys WHERE namespace = $1 AND idem_key = $2 FOR UPDATE",
                            2, params, &r, err, errsz);
        if (rc)
                return rc;
        if (PQntuples(r) != 1) {
                *result = RERUN_NOT_FOUND;
        } else {
                snprintf(info->status, sizeof(info->status), "%s", PQgetvalue(r, 0, 0));
                snprintf(info->topic, sizeof(info->topic), "%s", PQgetvalue(r, 0, 1));
                info->partition = (int32_t)strtol(PQgetvalue(r, 0, 2), NULL, 10);
                info->offset = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
                info->generation = atoi(PQgetvalue(r, 0, 4));
                *result = strcmp(info->status, "PENDING") ? RERUN_OK : RERUN_IN_FLIGHT;
        }
        PQclear(r);
        return STORE_OK;
}

/* --emit-only: the key's outbox rows back to unsent, as a given-up row's retry does. */
static enum store_rc outbox_again(struct store *s, const char *ns, const char *key, int *rows, char *err, size_t errsz)
{
        const char *params[2] = {ns, key};
        PGresult *r = NULL;
        enum store_rc rc = store_query(s,
                                       "UPDATE dedupd.outbox SET sent_at = NULL, given_up_at = NULL, failures = 0,"
                                       " retry_at = NULL, last_error = NULL"
                                       " WHERE namespace = $1 AND idem_key = $2",
                                       2, params, &r, err, errsz);
        if (rc)
                return rc;
        *rows = atoi(PQcmdTuples(r));
        PQclear(r);
        return STORE_OK;
}

static enum store_rc audit(struct store *s, const char *ns, const char *key, enum rerun_mode mode, const char *by,
                           const char *reason, const struct rerun_info *info, char *err, size_t errsz)
{
        char gen[16], rows[16];
        snprintf(gen, sizeof(gen), "%d", info->generation);
        snprintf(rows, sizeof(rows), "%d", info->outbox_rows);
        const char *params[7] = {ns, key, gen, mode_names[mode], by, reason, rows};
        return store_query(s,
                           "INSERT INTO dedupd.reruns (namespace, idem_key, generation, mode, requested_by, reason,"
                           " outbox_rows, prev_status, prev_response, prev_attempts, prev_topic, prev_partition,"
                           " prev_offset, prev_created_at)"
                           " SELECT $1, $2, $3::int, $4, $5, $6, $7::int, status, response, attempts, topic, partition,"
                           " \"offset\", created_at FROM dedupd.keys WHERE namespace = $1 AND idem_key = $2",
                           7, params, NULL, err, errsz);
}

static enum store_rc forget_key(struct store *s, const char *ns, const char *key, char *err, size_t errsz)
{
        const char *params[2] = {ns, key};
        return store_query(
                s,
                "WITH d AS (DELETE FROM dedupd.keys WHERE namespace = $1 AND idem_key = $2"
                " RETURNING namespace, idem_key, topic, partition)," TENANT_RELEASE("d") " SELECT count(*) FROM d",
                2, params, NULL, err, errsz);
}

enum store_rc store_rerun(struct store *s, const char *ns, const char *key, enum rerun_mode mode, const char *by,
                          const char *reason, enum rerun_result *result, struct rerun_info *info, char *err,
                          size_t errsz)
{
        enum store_rc rc;
        memset(info, 0, sizeof(*info));
        *result = RERUN_NOT_FOUND;
        if ((rc = store_begin(s, err, errsz)))
                return rc;
        if ((rc = lock_key(s, ns, key, result, info, err, errsz)) || *result != RERUN_OK)
                goto out;
        if (mode == RERUN_EMIT_ONLY && (rc = outbox_again(s, ns, key, &info->outbox_rows, err, errsz)))
                goto out;
        if (mode == RERUN_EMIT_ONLY && !info->outbox_rows) {
                *result = RERUN_NO_OUTBOX;
                goto out;
        }
        if ((rc = audit(s, ns, key, mode, by, reason, info, err, errsz)))
                goto out;
        if (mode == RERUN_REEXECUTE && (rc = forget_key(s, ns, key, err, errsz)))
                goto out;
        return store_commit(s, err, errsz);
out:
        store_rollback(s);
        return rc;
}

enum store_rc store_retry_failed(struct store *s, const char *ns, const char *const *keys, size_t nkeys,
                                 int64_t after_ms, const char *reason, size_t *n, char *err, size_t errsz)
{
        struct store_array ka = {0};
        char after[24];
        PGresult *r = NULL;
        enum store_rc rc;
        for (size_t i = 0; i < nkeys; i++)
                store_array_text(&ka, keys[i]);
        snprintf(after, sizeof(after), "%" PRId64, after_ms);
        const char *params[4] = {ns, store_array_finish(&ka), after, reason};
        *n = 0;
        rc = store_query(
                s,
                "WITH gone AS (DELETE FROM dedupd.keys WHERE namespace = $1 AND idem_key = ANY($2::text[])"
                " AND status = 'FAILED' AND updated_at < now() - $3::bigint * interval '1 millisecond'"
                " RETURNING *)," TENANT_RELEASE(
                        "gone") " INSERT INTO dedupd.reruns (namespace, idem_key, generation, mode, requested_by, "
                                "reason,"
                                " prev_status, prev_response, prev_attempts, prev_topic, prev_partition, prev_offset,"
                                " prev_created_at)"
                                " SELECT g.namespace, g.idem_key, 1 + (SELECT count(*) FROM dedupd.reruns r"
                                " WHERE r.namespace = g.namespace AND r.idem_key = g.idem_key), 'on-failed', 'dedupd', "
                                "$4,"
                                " g.status, g.response, g.attempts, g.topic, g.partition, g.\"offset\", g.created_at "
                                "FROM gone g"
                                " RETURNING idem_key",
                4, params, &r, err, errsz);
        store_array_free(&ka);
        if (rc)
                return rc;
        *n = (size_t)PQntuples(r);
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_rerun_history(struct store *s, const char *ns, const char *key, PGresult **out, char *err,
                                  size_t errsz)
{
        const char *params[2] = {ns, key};
        return store_query(
                s,
                "SELECT generation, mode,"
                " to_char(requested_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS requested_at,"
                " requested_by, db_user, reason, prev_status, coalesce(prev_response, '') AS prev_response,"
                " prev_attempts, outbox_rows"
                " FROM dedupd.reruns WHERE namespace = $1 AND idem_key = $2 ORDER BY generation",
                2, params, out, err, errsz);
}

enum store_rc store_rerun_counts(struct store *s, const char *ns, PGresult **out, char *err, size_t errsz)
{
        const char *params[1] = {ns};
        return store_query(s,
                           "SELECT mode, count(*) AS reruns FROM dedupd.reruns WHERE namespace = $1"
                           " GROUP BY mode ORDER BY mode",
                           1, params, out, err, errsz);
}
