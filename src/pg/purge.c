/* purge: the statements that end a key's life — expired responses, expired keys, old progress, sent outbox rows — and the table's size. */
#include "pg/purge.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "pg/store.h"
#include "pg/tenants.h"

/* $1 namespace, $2 batch. Responses past their own expiry go first, oldest
 * first: the key and its fingerprint stay, so a duplicate is still absorbed.
 * A key about to be deleted itself is left to the DELETE (no row version is
 * written for it). */
#define RESPONSE_EXPIRED                                                                                               \
        "namespace = $1 AND response IS NOT NULL AND response_expires_at IS NOT NULL"                                  \
        " AND response_expires_at < now()"                                                                             \
        " AND (status = 'PENDING' OR expires_at IS NULL OR expires_at >= now())"
static const char *const sql_drop_responses =
        "WITH v AS (SELECT namespace, idem_key FROM dedupd.keys WHERE " RESPONSE_EXPIRED
        " ORDER BY response_expires_at LIMIT $2::int FOR UPDATE SKIP LOCKED)"
        " UPDATE dedupd.keys k SET response = NULL FROM v"
        " WHERE k.namespace = v.namespace AND k.idem_key = v.idem_key";

/* $1 namespace, $2 batch. Oldest first, along keys_expiry: each batch reads
 * only what it deletes, however large the backlog. SKIP LOCKED: a row another
 * purger (or a claimer) holds is left to it, so concurrent purgers never wait
 * for each other and never delete a row twice. The rows are locked with the
 * conditions rechecked on their latest version and stay locked until the
 * DELETE commits: nobody can turn one back into PENDING in between.
 * (Repeating the conditions on the DELETE would make the planner scan every
 * expired key for each batch.) A tenant's keys are taken back from its
 * usage in the same statement. */
static const char *const sql_delete_keys =
        "WITH v AS (SELECT namespace, idem_key FROM dedupd.keys"
        " WHERE namespace = $1 AND status <> 'PENDING' AND status IN ('DONE', 'FAILED', 'EXPIRED')"
        " AND expires_at IS NOT NULL AND expires_at < now()"
        " ORDER BY expires_at LIMIT $2::int FOR UPDATE SKIP LOCKED)"
        " , d AS (DELETE FROM dedupd.keys k USING v"
        " WHERE k.namespace = v.namespace AND k.idem_key = v.idem_key"
        " RETURNING k.namespace, k.idem_key, k.topic, k.partition)," TENANT_RELEASE("d") " SELECT count(*) FROM d";

/* $1 namespace, $2 batch, $3 keep (ms). progress_log has no key: by ctid
 * (a TID scan), locked in the same statement. */
static const char *const sql_delete_progress =
        "DELETE FROM dedupd.progress_log WHERE ctid = ANY(ARRAY("
        " SELECT ctid FROM dedupd.progress_log"
        " WHERE namespace = $1 AND committed_at < now() - $3::bigint * interval '1 millisecond'"
        " ORDER BY committed_at LIMIT $2::int FOR UPDATE SKIP LOCKED))";

/* $1 namespace, $2 batch, $3 keep (ms): the fingerprint mismatches kept as long as the progress. */
static const char *const sql_delete_mismatches =
        "DELETE FROM dedupd.mismatches WHERE ctid = ANY(ARRAY("
        " SELECT ctid FROM dedupd.mismatches"
        " WHERE namespace = $1 AND noticed_at < now() - $3::bigint * interval '1 millisecond'"
        " ORDER BY noticed_at LIMIT $2::int FOR UPDATE SKIP LOCKED))";

/* $1 namespace, $2 batch, $3 keep (ms): the sampled duplicates' provenance, kept as long as the progress. */
static const char *const sql_delete_duplicates =
        "DELETE FROM dedupd.duplicates WHERE ctid = ANY(ARRAY("
        " SELECT ctid FROM dedupd.duplicates"
        " WHERE namespace = $1 AND seen_at < now() - $3::bigint * interval '1 millisecond'"
        " ORDER BY seen_at LIMIT $2::int FOR UPDATE SKIP LOCKED))";

/* Sent outbox rows older than the keep in parameter KEEP (ms): oldest first
 * along outbox_sent; an unsent or given-up row is never touched. */
#define OUTBOX_SENT_BEFORE(KEEP)                                                                                       \
        "namespace = $1 AND sent_at IS NOT NULL AND sent_at < now() - " KEEP "::bigint * interval '1 millisecond'"
/* $1 namespace, $2 batch, $3 keep (ms). */
static const char *const sql_delete_outbox = "DELETE FROM dedupd.outbox WHERE id = ANY(ARRAY("
                                             " SELECT id FROM dedupd.outbox WHERE " OUTBOX_SENT_BEFORE(
                                                     "$3") " ORDER BY sent_at LIMIT $2::int FOR UPDATE SKIP LOCKED))";
/* $1 namespace, $2 keep (ms). */
static const char *const sql_count_outbox = "SELECT count(*) FROM dedupd.outbox WHERE " OUTBOX_SENT_BEFORE("$2");

static const char *const sql_count =
        "SELECT"
        " (SELECT count(*) FROM dedupd.keys WHERE " RESPONSE_EXPIRED "),"
        " (SELECT count(*) FROM dedupd.keys WHERE namespace = $1 AND status <> 'PENDING'"
        "  AND status IN ('DONE', 'FAILED', 'EXPIRED') AND expires_at IS NOT NULL AND expires_at < now()),"
        " (SELECT count(*) FROM dedupd.progress_log WHERE namespace = $1"
        "  AND committed_at < now() - $2::bigint * interval '1 millisecond'),"
        " (SELECT count(*) FROM dedupd.keys WHERE namespace = $1 AND status = 'PENDING'"
        "  AND expires_at < now()),"
        " (SELECT count(*) FROM dedupd.mismatches WHERE namespace = $1"
        "  AND noticed_at < now() - $2::bigint * interval '1 millisecond'),"
        " (SELECT count(*) FROM dedupd.duplicates WHERE namespace = $1"
        "  AND seen_at < now() - $2::bigint * interval '1 millisecond')";

static const char *const sql_pending_kept =
        "SELECT count(*) FROM dedupd.keys WHERE namespace = $1 AND status = 'PENDING' AND expires_at < now()";

/* One statement at a time until one takes fewer than batch rows (nothing
 * left that nobody else holds) or the deadline (0: none) passes. */
static int purge_loop(struct store *s, const char *sql, int nparams, const char *const *params, int batch,
                      int64_t deadline_ms, int64_t *count, struct purge_stats *st, char *err, size_t errsz)
{
        for (;;) {
                PGresult *r = NULL;
                int64_t n;
                if (store_query(s, sql, nparams, params, &r, err, errsz))
                        return -1;
                /* a DELETE's count, or the one a statement that SELECTs it returns */
                n = strtoll(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? PQgetvalue(r, 0, 0)
                                                                                      : PQcmdTuples(r),
                            NULL, 10);
                PQclear(r);
                *count += n;
                st->statements++;
                if (n < batch)
                        return 0;
                if (deadline_ms && log_now_ms() >= deadline_ms) {
                        st->more = 1;
                        return 0;
                }
        }
}

int store_purge(struct store *s, const char *ns, int batch, int64_t progress_keep_ms, int64_t outbox_keep_ms,
                int64_t deadline_ms, struct purge_stats *st, char *err, size_t errsz)
{
        char b[16], keep[24], okeep[24];
        const char *params[3] = {ns, b, keep}, *oparams[3] = {ns, b, okeep};
        PGresult *r = NULL;

        memset(st, 0, sizeof(*st));
        st->progress_keep_ms = progress_keep_ms;
        st->outbox_keep_ms = outbox_keep_ms;
        snprintf(b, sizeof(b), "%d", batch);
        snprintf(keep, sizeof(keep), "%" PRId64, progress_keep_ms);
        snprintf(okeep, sizeof(okeep), "%" PRId64, outbox_keep_ms);
        if (purge_loop(s, sql_drop_responses, 2, params, batch, deadline_ms, &st->responses, st, err, errsz))
                return -1;
        if (!st->more && purge_loop(s, sql_delete_keys, 2, params, batch, deadline_ms, &st->keys, st, err, errsz))
                return -1;
        if (!st->more &&
            purge_loop(s, sql_delete_progress, 3, params, batch, deadline_ms, &st->progress_rows, st, err, errsz))
                return -1;
        if (!st->more &&
            purge_loop(s, sql_delete_mismatches, 3, params, batch, deadline_ms, &st->mismatch_rows, st, err, errsz))
                return -1;
        if (!st->more &&
            purge_loop(s, sql_delete_duplicates, 3, params, batch, deadline_ms, &st->duplicate_rows, st, err, errsz))
                return -1;
        if (!st->more && outbox_keep_ms > 0 &&
            purge_loop(s, sql_delete_outbox, 3, oparams, batch, deadline_ms, &st->outbox_rows, st, err, errsz))
                return -1;
        if (!deadline_ms) {
                if (store_query(s, sql_pending_kept, 1, params, &r, err, errsz))
                        return -1;
                st->pending_kept = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
                PQclear(r);
        }
        return 0;
}

static int count_outbox(struct store *s, const char *ns, int64_t keep_ms, int64_t *n, char *err, size_t errsz)
{
        char keep[24];
        const char *params[2] = {ns, keep};
        PGresult *r = NULL;
        *n = 0;
        if (keep_ms <= 0)
                return 0;
        snprintf(keep, sizeof(keep), "%" PRId64, keep_ms);
        if (store_query(s, sql_count_outbox, 2, params, &r, err, errsz))
                return -1;
        *n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
        return 0;
}

int store_purge_count(struct store *s, const char *ns, int64_t progress_keep_ms, int64_t outbox_keep_ms,
                      struct purge_stats *st, char *err, size_t errsz)
{
        char keep[24];
        const char *params[2] = {ns, keep};
        PGresult *r = NULL;

        memset(st, 0, sizeof(*st));
        st->progress_keep_ms = progress_keep_ms;
        st->outbox_keep_ms = outbox_keep_ms;
        if (count_outbox(s, ns, outbox_keep_ms, &st->outbox_rows, err, errsz))
                return -1;
        snprintf(keep, sizeof(keep), "%" PRId64, progress_keep_ms);
        if (store_query(s, sql_count, 2, params, &r, err, errsz))
                return -1;
        st->responses = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        st->keys = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        st->progress_rows = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
        st->pending_kept = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
        st->mismatch_rows = strtoll(PQgetvalue(r, 0, 4), NULL, 10);
        st->duplicate_rows = strtoll(PQgetvalue(r, 0, 5), NULL, 10);
        PQclear(r);
        return 0;
}

int store_keys_size(struct store *s, const char *ns, struct keys_size *ks, char *err, size_t errsz)
{
        const char *params[1] = {ns};
        PGresult *r = NULL;
        double reltuples;

        memset(ks, 0, sizeof(*ks));
        ks->ns_rows = -1;
        if (store_query(s,
                        /* the table, or under keys.layout: partitioned its partitions */
                        "WITH t AS (SELECT to_regclass('dedupd.keys') AS relid"
                        "           UNION SELECT relid FROM pg_partition_tree(to_regclass('dedupd.keys')))"
                        " SELECT to_regclass('dedupd.keys') IS NOT NULL,"
                        " coalesce((SELECT sum(pg_total_relation_size(relid)) FROM t), 0)::bigint,"
                        " coalesce((SELECT sum(c.reltuples) FROM t JOIN pg_class c ON c.oid = t.relid"
                        "           WHERE c.reltuples >= 0), -1)",
                        0, NULL, &r, err, errsz))
                return -1;
        ks->exists = !strcmp(PQgetvalue(r, 0, 0), "t");
        ks->total_bytes = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        reltuples = strtod(PQgetvalue(r, 0, 2), NULL);
        PQclear(r);
        if (!ks->exists)
                return 0;
        if (reltuples >= 1e6) {
                /* count(*) over a billion rows is no planning tool: ANALYZE's estimate. */
                ks->rows = (int64_t)reltuples;
                return 0;
        }
        if (store_query(s, "SELECT count(*), count(*) FILTER (WHERE namespace = $1) FROM dedupd.keys", 1, params, &r,
                        err, errsz))
                return -1;
        ks->rows = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        ks->ns_rows = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        PQclear(r);
        return 0;
}
