/* verify: audit the dedup tables, the handlers' evidence and the lag, and list every anomaly. */
#include "verify.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "loader.h"
#include "replay.h"
#include "store.h"

#define KAFKA_TIMEOUT_MS 15000

static const char *const statuses[] = {"DONE", "FAILED", "PENDING", "EXPIRED"};
#define STATUS_CNT 4

/*
 * The example handlers' evidence: one row per applied effect, keyed by the
 * idempotency key. Table names are constants spliced by the preprocessor;
 * only values (namespace, topics) travel as parameters.
 */
#define EVIDENCE(HANDLER, TABLE)                                                                     \
        {                                                                                            \
                HANDLER, TABLE, {                                                                    \
                /* keys with more than one effect (of this namespace, or of none) */                 \
                "SELECT e.idem_key, count(*), k.topic, k.partition, k.\"offset\" FROM " TABLE " e"   \
                " LEFT JOIN dedupd.keys k ON k.namespace = $1 AND k.idem_key = e.idem_key"           \
                " WHERE k.idem_key IS NOT NULL OR NOT EXISTS"                                        \
                " (SELECT 1 FROM dedupd.keys o WHERE o.idem_key = e.idem_key)"                       \
                " GROUP BY e.idem_key, k.topic, k.partition, k.\"offset\" HAVING count(*) > 1"       \
                " ORDER BY e.idem_key",                                                              \
                /* DONE keys of the handler's topics without an effect */                            \
                "SELECT k.idem_key, 0, k.topic, k.partition, k.\"offset\" FROM dedupd.keys k"        \
                " WHERE k.namespace = $1 AND k.status = 'DONE' AND k.topic = ANY($2::text[])"        \
                " AND NOT EXISTS (SELECT 1 FROM " TABLE " e WHERE e.idem_key = k.idem_key)"          \
                " ORDER BY k.idem_key",                                                              \
                /* FAILED keys with an effect */                                                     \
                "SELECT k.idem_key, (SELECT count(*) FROM " TABLE " e WHERE e.idem_key = k.idem_key)," \
                " k.topic, k.partition, k.\"offset\" FROM dedupd.keys k"                             \
                " WHERE k.namespace = $1 AND k.status = 'FAILED'"                                    \
                " AND EXISTS (SELECT 1 FROM " TABLE " e WHERE e.idem_key = k.idem_key)"              \
                " ORDER BY k.idem_key",                                                              \
                }                                                                                    \
        }

struct evidence {
        const char *handler, *table;
        const char *sql[3];
};

static const struct evidence evidences[] = {
        EVIDENCE("transfer", "transfer_ledger"),
        EVIDENCE("flaky", "flaky_effects"),
};
#define EVIDENCE_CNT (sizeof(evidences) / sizeof(evidences[0]))

static const char *const evidence_checks[3] = {
        "keys with more than one effect",
        "DONE keys with no effect",
        "FAILED keys with an effect",
};
static const char *const evidence_kinds[3] = {"two-effects", "done-without-effect", "failed-with-effect"};

/* Anomalies, each one line, printed together at the end. */
struct findings {
        char **lines;
        size_t cnt, cap;
};

static void add(struct findings *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct findings *f, const char *fmt, ...)
{
        va_list ap;
        char *line = NULL;
        if (f->cnt == f->cap) {
                size_t cap = f->cap ? f->cap * 2 : 64;
                char **nl = realloc(f->lines, cap * sizeof(*nl));
                if (!nl)
                        abort(); /* out of memory writing a report: nothing sane to do */
                f->lines = nl;
                f->cap = cap;
        }
        va_start(ap, fmt);
        if (vasprintf(&line, fmt, ap) < 0)
                abort();
        va_end(ap);
        f->lines[f->cnt++] = line;
}

static void findings_free(struct findings *f)
{
        for (size_t i = 0; i < f->cnt; i++)
                free(f->lines[i]);
        free(f->lines);
}

/* "payments/2 offset 17", from columns topic, partition, offset (NULL-able). */
static void origin(const PGresult *r, int row, int col, char *buf, size_t sz)
{
        if (PQgetisnull(r, row, col))
                snprintf(buf, sz, "no dedup record");
        else
                snprintf(buf, sz, "from %s/%s offset %s", PQgetvalue(r, row, col), PQgetvalue(r, row, col + 1),
                         PQgetvalue(r, row, col + 2));
}

static PGresult *query(PGconn *conn, const char *sql, int n, const char *const *params, char *err,
                       size_t errsz)
{
        PGresult *r = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(r) == PGRES_TUPLES_OK)
                return r;
        snprintf(err, errsz, "%s", PQresultErrorMessage(r));
        err[strcspn(err, "\n")] = '\0';
        PQclear(r);
        return NULL;
}

static int keys_by_status(PGconn *conn, const char *ns, struct findings *f, char *err, size_t errsz)
{
        const char *params[1] = {ns};
        int64_t cnt[STATUS_CNT] = {0}, total = 0;
        PGresult *r = query(conn, "SELECT status, count(*) FROM dedupd.keys WHERE namespace = $1 GROUP BY status",
                            1, params, err, errsz);
        if (!r)
                return -1;
        for (int row = 0; row < PQntuples(r); row++)
                for (int s = 0; s < STATUS_CNT; s++)
                        if (!strcmp(PQgetvalue(r, row, 0), statuses[s]))
                                cnt[s] = strtoll(PQgetvalue(r, row, 1), NULL, 10);
        PQclear(r);
        printf("keys by status\n");
        for (int s = 0; s < STATUS_CNT; s++) {
                printf("  %-32s %10" PRId64 "\n", statuses[s], cnt[s]);
                total += cnt[s];
        }
        printf("  %-32s %10" PRId64 "\n", "total", total);

        /* In doubt: in transactional mode nobody should ever see PENDING. */
        r = query(conn,
                  "SELECT idem_key, status, topic, partition, \"offset\","
                  " to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
                  " FROM dedupd.keys WHERE namespace = $1 AND (status = 'EXPIRED'"
                  " OR (status = 'PENDING' AND updated_at < now() - interval '10 minutes'))"
                  " ORDER BY status, idem_key",
                  1, params, err, errsz);
        if (!r)
                return -1;
        for (int row = 0; row < PQntuples(r); row++) {
                char o[256];
                origin(r, row, 2, o, sizeof(o));
                add(f, "in-doubt: key %s (%s): %s since %s", PQgetvalue(r, row, 0), o, PQgetvalue(r, row, 1),
                    PQgetvalue(r, row, 5));
        }
        printf("  %-32s %10d\n", "in doubt (EXPIRED, PENDING>10m)", PQntuples(r));
        PQclear(r);
        return 0;
}

static int counters(PGconn *conn, const struct config *cfg, const struct verify_opts *o, char *err,
                    size_t errsz)
{
        static const char *const names[] = {"consumed", "applied", "rejected", "duplicates absorbed",
                                            "dead-lettered"};
        const char *params[2] = {cfg->namespace, NULL};
        char since[24];
        PGresult *r = query(conn,
                            "SELECT coalesce(sum(consumed), 0), coalesce(sum(applied), 0),"
                            " coalesce(sum(rejected), 0), coalesce(sum(duplicates), 0),"
                            " coalesce(sum(dead_lettered), 0),"
                            " (SELECT count(*) FROM dedupd.keys WHERE namespace = $1 AND status = 'DONE'),"
                            " (SELECT count(*) FROM dedupd.keys WHERE namespace = $1 AND status = 'FAILED'),"
                            " (SELECT count(*) FROM dedupd.keys WHERE namespace = $1)"
                            " FROM dedupd.offsets WHERE namespace = $1",
                            1, params, err, errsz);
        if (!r)
                return -1;
        printf("\nrecords vs keys (dedupd.offsets, all time)\n");
        for (int c = 0; c < 5; c++) {
                printf("  %-32s %10s", names[c], PQgetvalue(r, 0, c));
                if (c == 1)
                        printf("   DONE keys   %s", PQgetvalue(r, 0, 5));
                else if (c == 2)
                        printf("   FAILED keys %s", PQgetvalue(r, 0, 6));
                printf("\n");
        }
        printf("  %-32s %10s\n", "distinct keys", PQgetvalue(r, 0, 7));
        PQclear(r);
        if (o->since_ms < 0)
                return 0;

        snprintf(since, sizeof(since), "%" PRId64, o->since_ms);
        params[1] = since;
        r = query(conn,
                  "SELECT coalesce(sum(consumed), 0), coalesce(sum(applied), 0),"
                  " coalesce(sum(rejected), 0), coalesce(sum(duplicates), 0),"
                  " coalesce(sum(dead_lettered), 0), count(*),"
                  " to_char(to_timestamp($2::bigint / 1000.0) AT TIME ZONE 'UTC',"
                  " 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
                  " FROM dedupd.progress_log WHERE namespace = $1"
                  " AND committed_at >= to_timestamp($2::bigint / 1000.0)",
                  2, params, err, errsz);
        if (!r)
                return -1;
        printf("\nsince %s (dedupd.progress_log, %s batches)\n", PQgetvalue(r, 0, 6), PQgetvalue(r, 0, 5));
        for (int c = 0; c < 5; c++)
                printf("  %-32s %10s\n", names[c], PQgetvalue(r, 0, c));
        PQclear(r);
        return 0;
}

/* Which handler serves each configured topic, by its descriptor's name
 * (loading runs nothing of the handler but its descriptor function). */
static char **handler_names(const struct config *cfg)
{
        char **names = calloc(cfg->topic_cnt ? cfg->topic_cnt : 1, sizeof(*names));
        if (!names)
                abort();
        for (size_t t = 0; t < cfg->topic_cnt; t++) {
                struct handler h = {0};
                char lerr[512];
                if (loader_open(&h, cfg->topics[t].handler_path, lerr, sizeof(lerr))) {
                        printf("  (topic %s: handler not loadable, its effects are not checked: %s)\n",
                               cfg->topics[t].name, lerr);
                        continue;
                }
                names[t] = strdup(h.desc->name ? h.desc->name : "");
                loader_close(&h);
        }
        return names;
}

static int evidence(PGconn *conn, const struct config *cfg, struct findings *f, char *err, size_t errsz)
{
        /* Parameters each check uses: $1 namespace, $2 the handler's topics. */
        static const int nparams[3] = {1, 2, 1};
        char **names;
        int rc = -1;

        printf("\neffects (the handlers' evidence tables)\n");
        names = handler_names(cfg);
        for (size_t e = 0; e < EVIDENCE_CNT; e++) {
                const struct evidence *ev = &evidences[e];
                struct store_array topics = {0};
                const char *reg[1] = {ev->table};
                char shown[256] = "";
                PGresult *r;

                for (size_t t = 0; t < cfg->topic_cnt; t++)
                        if (names[t] && !strcmp(names[t], ev->handler)) {
                                store_array_text(&topics, cfg->topics[t].name);
                                snprintf(shown + strlen(shown), sizeof(shown) - strlen(shown), "%s%s",
                                         topics.cnt > 1 ? ", " : "", cfg->topics[t].name);
                        }
                if (!topics.cnt)
                        continue; /* no topic of this config uses the handler */
                const char *params[2] = {cfg->namespace, store_array_finish(&topics)};
                if (!(r = query(conn, "SELECT to_regclass($1) IS NOT NULL", 1, reg, err, errsz))) {
                        store_array_free(&topics);
                        goto out;
                }
                int exists = !strcmp(PQgetvalue(r, 0, 0), "t");
                PQclear(r);
                if (!exists) {
                        printf("  %s: no table %s yet\n", ev->handler, ev->table);
                        store_array_free(&topics);
                        continue;
                }
                printf("  %s (handler %s, topic%s %s)\n", ev->table, ev->handler, topics.cnt > 1 ? "s" : "",
                       shown);
                for (int c = 0; c < 3; c++) {
                        if (!(r = query(conn, ev->sql[c], nparams[c], params, err, errsz))) {
                                store_array_free(&topics);
                                goto out;
                        }
                        for (int row = 0; row < PQntuples(r); row++) {
                                char o[256];
                                origin(r, row, 2, o, sizeof(o));
                                add(f, "%s: key %s (%s): %s row%s in %s", evidence_kinds[c], PQgetvalue(r, row, 0),
                                    o, PQgetvalue(r, row, 1), strcmp(PQgetvalue(r, row, 1), "1") ? "s" : "",
                                    ev->table);
                        }
                        printf("    %-30s %10d\n", evidence_checks[c], PQntuples(r));
                        PQclear(r);
                }
                store_array_free(&topics);
        }
        rc = 0;
out:
        for (size_t t = 0; t < cfg->topic_cnt; t++)
                free(names[t]);
        free(names);
        return rc;
}

/* High watermark minus dedupd's next offset and minus Kafka's committed
 * offset, per partition of every configured topic. */
static int lag(PGconn *conn, const struct config *cfg, const struct verify_opts *o, struct findings *f,
               char *err, size_t errsz)
{
        const char *group = replay_group_id(cfg);
        rd_kafka_t *rk = replay_client_new(cfg, RD_KAFKA_CONSUMER, group, err, errsz);
        int64_t db_total = 0, kafka_total = 0;
        int rc = -1;

        if (!rk)
                return -1;
        printf("\nlag (group %s: high watermark minus position; no position counts from the low watermark)\n",
               group ? group : "?");
        printf("  %-24s %9s %12s %12s %9s %12s %9s\n", "topic", "partition", "high", "dedupd", "lag", "kafka",
               "lag");
        for (size_t t = 0; t < cfg->topic_cnt; t++) {
                const char *topic = cfg->topics[t].name;
                int n = replay_partition_count(rk, topic, err, errsz);
                const char *params[2] = {cfg->namespace, topic};
                PGresult *r;
                rd_kafka_topic_partition_list_t *l;
                rd_kafka_resp_err_t e;

                if (n < 0)
                        goto out;
                if (!(r = query(conn, "SELECT partition, next_offset FROM dedupd.offsets"
                                      " WHERE namespace = $1 AND topic = $2",
                                2, params, err, errsz)))
                        goto out;
                l = rd_kafka_topic_partition_list_new(n);
                for (int p = 0; p < n; p++)
                        rd_kafka_topic_partition_list_add(l, topic, p);
                if ((e = rd_kafka_committed(rk, l, KAFKA_TIMEOUT_MS))) {
                        snprintf(err, errsz, "committed offsets of group %s: %s", group, rd_kafka_err2str(e));
                        rd_kafka_topic_partition_list_destroy(l);
                        PQclear(r);
                        goto out;
                }
                for (int p = 0; p < n && !e; p++) {
                        int64_t lo, hi, db = -1, kc = l->elems[p].offset;
                        if ((e = rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, KAFKA_TIMEOUT_MS))) {
                                snprintf(err, errsz, "watermarks of %s/%d: %s", topic, p, rd_kafka_err2str(e));
                                break;
                        }
                        for (int row = 0; row < PQntuples(r); row++)
                                if (atoi(PQgetvalue(r, row, 0)) == p)
                                        db = strtoll(PQgetvalue(r, row, 1), NULL, 10);
                        int64_t dlag = hi - (db >= 0 ? db : lo), klag = hi - (kc >= 0 ? kc : lo);
                        char dbs[24] = "-", ks[24] = "-";
                        if (db >= 0)
                                snprintf(dbs, sizeof(dbs), "%" PRId64, db);
                        if (kc >= 0)
                                snprintf(ks, sizeof(ks), "%" PRId64, kc);
                        printf("  %-24s %9d %12" PRId64 " %12s %9" PRId64 " %12s %9" PRId64 "\n", topic, p, hi,
                               dbs, dlag, ks, klag);
                        db_total += dlag;
                        kafka_total += klag;
                        if (o->expect_caught_up && (dlag > 0 || klag > 0))
                                add(f, "lag: %s/%d is not caught up: high watermark %" PRId64 ", dedupd at %s"
                                       " (lag %" PRId64 "), Kafka's committed offset %s (lag %" PRId64 ")",
                                    topic, p, hi, dbs, dlag, ks, klag);
                }
                rd_kafka_topic_partition_list_destroy(l);
                PQclear(r);
                if (e)
                        goto out;
        }
        printf("  %-24s %9s %12s %12s %9" PRId64 " %12s %9" PRId64 "\n", "total", "", "", "", db_total, "",
               kafka_total);
        rc = 0;
out:
        rd_kafka_destroy(rk);
        return rc;
}

enum verify_rc verify_run(const struct config *cfg, const struct verify_opts *o, char *err,
                          size_t errsz)
{
        struct store s = {0};
        struct findings f = {0};
        enum verify_rc rc = VERIFY_ERROR;
        const char *reg[1] = {"dedupd.progress_log"};
        PGresult *r;

        if (store_connect(&s, cfg->pg_conninfo, err, errsz) != STORE_OK)
                return VERIFY_ERROR;
        if (!(r = query(s.conn, "SELECT to_regclass($1) IS NOT NULL", 1, reg, err, errsz)))
                goto out;
        if (strcmp(PQgetvalue(r, 0, 0), "t")) {
                snprintf(err, errsz, "no dedupd schema (or an old one) in database %s: run dedupctl migrate",
                         s.target);
                PQclear(r);
                goto out;
        }
        PQclear(r);
        printf("namespace %s, database %s\n\n", cfg->namespace, s.target);
        if (keys_by_status(s.conn, cfg->namespace, &f, err, errsz) || counters(s.conn, cfg, o, err, errsz) ||
            evidence(s.conn, cfg, &f, err, errsz) || lag(s.conn, cfg, o, &f, err, errsz))
                goto out;
        if (f.cnt) {
                printf("\n%zu anomal%s:\n", f.cnt, f.cnt == 1 ? "y" : "ies");
                for (size_t i = 0; i < f.cnt; i++)
                        printf("  %s\n", f.lines[i]);
                rc = VERIFY_ANOMALIES;
        } else {
                printf("\nno anomaly: no key with two effects, every DONE key has its effect, no FAILED key "
                       "has one, nothing in doubt%s\n",
                       o->expect_caught_up ? ", every partition caught up" : "");
                rc = VERIFY_OK;
        }
out:
        if (rc == VERIFY_ERROR && f.cnt) {
                /* Found before the failure: still worth knowing. */
                fprintf(stderr, "anomalies found before the error:\n");
                for (size_t i = 0; i < f.cnt; i++)
                        fprintf(stderr, "  %s\n", f.lines[i]);
        }
        findings_free(&f);
        store_close(&s);
        return rc;
}
