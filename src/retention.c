/* retention: the end of a key's life — purge of expired keys, capacity plan; the retention rule topics.c checks against the broker. */
#include "retention.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Fewer rows than this say more about 8 kB pages than about a row. */
#define PLAN_MIN_MEASURED_ROWS 10000

/* The daemon purges at most this long per tick, then lets the consumer poll. */
#define TICK_BUDGET_MS 500

/* ---- SQL ------------------------------------------------------------------- */

/* $1 namespace, $2 batch. Responses past their own expiry go first, oldest
 * first: the key and its fingerprint stay, so a duplicate is still absorbed.
 * A key about to be deleted itself is left to the DELETE (no row version is
 * written for it). */
#define RESPONSE_EXPIRED                                                                       \
        "namespace = $1 AND response IS NOT NULL AND response_expires_at IS NOT NULL"          \
        " AND response_expires_at < now()"                                                     \
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
 * expired key for each batch.) */
static const char *const sql_delete_keys =
        "WITH v AS (SELECT namespace, idem_key FROM dedupd.keys"
        " WHERE namespace = $1 AND status <> 'PENDING' AND status IN ('DONE', 'FAILED', 'EXPIRED')"
        " AND expires_at IS NOT NULL AND expires_at < now()"
        " ORDER BY expires_at LIMIT $2::int FOR UPDATE SKIP LOCKED)"
        " DELETE FROM dedupd.keys k USING v"
        " WHERE k.namespace = v.namespace AND k.idem_key = v.idem_key";

/* $1 namespace, $2 batch, $3 keep (ms). progress_log has no key: by ctid
 * (a TID scan), locked in the same statement. */
static const char *const sql_delete_progress =
        "DELETE FROM dedupd.progress_log WHERE ctid = ANY(ARRAY("
        " SELECT ctid FROM dedupd.progress_log"
        " WHERE namespace = $1 AND committed_at < now() - $3::bigint * interval '1 millisecond'"
        " ORDER BY committed_at LIMIT $2::int FOR UPDATE SKIP LOCKED))";

static const char *const sql_count =
        "SELECT"
        " (SELECT count(*) FROM dedupd.keys WHERE " RESPONSE_EXPIRED "),"
        " (SELECT count(*) FROM dedupd.keys WHERE namespace = $1 AND status <> 'PENDING'"
        "  AND status IN ('DONE', 'FAILED', 'EXPIRED') AND expires_at IS NOT NULL AND expires_at < now()),"
        " (SELECT count(*) FROM dedupd.progress_log WHERE namespace = $1"
        "  AND committed_at < now() - $2::bigint * interval '1 millisecond'),"
        " (SELECT count(*) FROM dedupd.keys WHERE namespace = $1 AND status = 'PENDING'"
        "  AND expires_at < now())";

static const char *const sql_pending_kept =
        "SELECT count(*) FROM dedupd.keys WHERE namespace = $1 AND status = 'PENDING' AND expires_at < now()";

/* ---- purge ----------------------------------------------------------------- */

int64_t retention_progress_keep_ms(const struct config *cfg)
{
        int64_t keep = 0;
        for (size_t i = 0; i < cfg->class_cnt; i++)
                if (cfg->classes[i].keep_ms > keep)
                        keep = cfg->classes[i].keep_ms;
        return keep > 0 ? keep : RETENTION_PROGRESS_DEFAULT_MS;
}

/* One statement at a time until one takes fewer than batch rows (nothing
 * left that nobody else holds) or the deadline (0: none) passes. */
static int purge_loop(struct store *s, const char *sql, int nparams, const char *const *params,
                      int batch, int64_t deadline_ms, int64_t *count, struct purge_stats *st,
                      char *err, size_t errsz)
{
        for (;;) {
                PGresult *r = NULL;
                int64_t n;
                if (store_query(s, sql, nparams, params, &r, err, errsz))
                        return -1;
                n = strtoll(PQcmdTuples(r), NULL, 10);
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

static int purge_run(struct store *s, const struct config *cfg, int batch, int64_t deadline_ms,
                     int count_pending, struct purge_stats *st, char *err, size_t errsz)
{
        char b[16], keep[24];
        const char *params[3] = {cfg->namespace, b, keep};
        PGresult *r = NULL;

        memset(st, 0, sizeof(*st));
        if (batch <= 0)
                batch = cfg->purge_batch > 0 ? cfg->purge_batch : 1000;
        st->progress_keep_ms = retention_progress_keep_ms(cfg);
        snprintf(b, sizeof(b), "%d", batch);
        snprintf(keep, sizeof(keep), "%" PRId64, st->progress_keep_ms);
        if (purge_loop(s, sql_drop_responses, 2, params, batch, deadline_ms, &st->responses, st, err,
                       errsz))
                return -1;
        if (!st->more &&
            purge_loop(s, sql_delete_keys, 2, params, batch, deadline_ms, &st->keys, st, err, errsz))
                return -1;
        if (!st->more && purge_loop(s, sql_delete_progress, 3, params, batch, deadline_ms,
                                    &st->progress_rows, st, err, errsz))
                return -1;
        if (count_pending) {
                if (store_query(s, sql_pending_kept, 1, params, &r, err, errsz))
                        return -1;
                st->pending_kept = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
                PQclear(r);
        }
        return 0;
}

int retention_purge(struct store *s, const struct config *cfg, int batch, struct purge_stats *st,
                    char *err, size_t errsz)
{
        return purge_run(s, cfg, batch, 0, 1, st, err, errsz);
}

int retention_purge_count(struct store *s, const struct config *cfg, struct purge_stats *st,
                          char *err, size_t errsz)
{
        char keep[24];
        const char *params[2] = {cfg->namespace, keep};
        PGresult *r = NULL;

        memset(st, 0, sizeof(*st));
        st->progress_keep_ms = retention_progress_keep_ms(cfg);
        snprintf(keep, sizeof(keep), "%" PRId64, st->progress_keep_ms);
        if (store_query(s, sql_count, 2, params, &r, err, errsz))
                return -1;
        st->responses = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        st->keys = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        st->progress_rows = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
        st->pending_kept = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
        PQclear(r);
        return 0;
}

/* One daemon per process: the schedule lives here, not in the consumer. */
static int64_t next_purge_ms;
static struct log_ratelimit purge_rl;

void retention_tick(struct store *s, const struct config *cfg, int64_t now_ms)
{
        struct purge_stats st;
        char err[512];
        int rc;

        if (cfg->purge_interval_ms <= 0)
                return;
        if (!next_purge_ms) {
                /* Not at start: a fleet restarting at once would purge at once. */
                next_purge_ms = now_ms + cfg->purge_interval_ms;
                return;
        }
        /* Between batches only, on an idle connection the pipeline is not using. */
        if (now_ms < next_purge_ms || !store_ok(s) || PQtransactionStatus(s->conn) != PQTRANS_IDLE)
                return;
        rc = purge_run(s, cfg, cfg->purge_batch, now_ms + TICK_BUDGET_MS, 0, &st, err, sizeof(err));
        next_purge_ms = log_now_ms() + (st.more && !rc ? TICK_BUDGET_MS : cfg->purge_interval_ms);
        if (rc && log_ratelimit_ok(&purge_rl, 1, 60000))
                log_warn("retention", "purge failed (retrying in %d ms): %s", cfg->purge_interval_ms, err);
        if (st.keys || st.responses || st.progress_rows)
                log_info("retention",
                         "purged %" PRId64 " expired key(s), %" PRId64 " response(s) past response_ttl, "
                         "%" PRId64 " progress_log row(s) in %" PRId64 " ms%s",
                         st.keys, st.responses, st.progress_rows, log_now_ms() - now_ms,
                         st.more ? "; more to go, continuing" : "");
}

/* ---- topic retention check -------------------------------------------------- */

int retention_compare(const char *topic, const struct retention_class *c, int64_t retention_ms,
                      const char *cleanup_policy, char *msg, size_t msgsz)
{
        char keep[64], ret[64], diff[64];
        /* "compact" alone keeps the last record of every Kafka key for ever */
        int compacted = cleanup_policy && strstr(cleanup_policy, "compact") &&
                        !strstr(cleanup_policy, "delete");

        if (c->allow_shorter_than_topic)
                return 0;
        config_format_duration(c->keep_ms, keep, sizeof(keep));
        if (compacted) {
                snprintf(msg, msgsz,
                         "topic %s: retention class '%s' keeps keys %s but the topic is compacted "
                         "(cleanup.policy=%s) and keeps the last message of every Kafka key for ever: "
                         "a message still in the topic could be replayed after its key was purged — no "
                         "keep is long enough; set allow_shorter_than_topic: true if replaying it after "
                         "%s is acceptable",
                         topic, c->name, keep, cleanup_policy, keep);
                return -1;
        }
        if (retention_ms < 0) {
                snprintf(msg, msgsz,
                         "topic %s: retention class '%s' keeps keys %s but the topic retains messages "
                         "for ever (retention.ms=%" PRId64 "): a message still in the topic could be "
                         "replayed after its key was purged — no keep is long enough; set "
                         "allow_shorter_than_topic: true if replaying it after %s is acceptable",
                         topic, c->name, keep, retention_ms, keep);
                return -1;
        }
        if (c->keep_ms >= retention_ms)
                return 0;
        config_format_duration(retention_ms, ret, sizeof(ret));
        config_format_duration(retention_ms - c->keep_ms, diff, sizeof(diff));
        snprintf(msg, msgsz,
                 "topic %s: retention class '%s' keeps keys %s but the topic retains messages for %s "
                 "(retention.ms=%" PRId64 "): a message still in the topic could be replayed after its "
                 "key was purged — %s too short; set keep >= %s or allow_shorter_than_topic: true",
                 topic, c->name, keep, ret, retention_ms, diff, ret);
        return -1;
}

/* ---- capacity plan ---------------------------------------------------------- */

int plan_class(double rate_per_s, int64_t keep_ms, double row_bytes, uint64_t *rows,
               uint64_t *bytes)
{
        double r, b;
        if (!isfinite(rate_per_s) || !isfinite(row_bytes) || rate_per_s < 0 || keep_ms < 0 ||
            row_bytes < 0)
                return -1;
        r = rate_per_s * (double)keep_ms / 1000.0;
        if (r >= 1.8e19)
                return -1;
        *rows = (uint64_t)(r + 0.5);
        b = (double)*rows * row_bytes;
        if (b >= 1.8e19)
                return -1;
        *bytes = (uint64_t)(b + 0.5);
        return 0;
}

int plan_parse_rate(const char *s, double *per_s, char *err, size_t errsz)
{
        static const struct { const char *unit; double secs; } units[] = {
                {"", 1}, {"/s", 1}, {"/sec", 1}, {"/second", 1}, {"/min", 60}, {"/minute", 60},
                {"/m", 60}, {"/h", 3600}, {"/hour", 3600},
        };
        char *end;
        double v;

        if (!s || !*s)
                goto bad;
        errno = 0;
        v = strtod(s, &end);
        if (end == s || errno || !isfinite(v) || v <= 0 || *s == '+' || *s == ' ')
                goto bad;
        for (size_t i = 0; i < sizeof(units) / sizeof(*units); i++)
                if (!strcmp(end, units[i].unit)) {
                        *per_s = v / units[i].secs;
                        return 0;
                }
bad:
        snprintf(err, errsz,
                 "--rate '%s': expected a positive number of messages per second, minute or hour: "
                 "10000/s, 600000/min, 36000000/h, or 10000 (per second)",
                 s ? s : "");
        return -1;
}

static const char *human(uint64_t n, const char *const *units, size_t unit_cnt, double step,
                         const char *sep, char *buf, size_t bufsz)
{
        double v = (double)n;
        size_t u = 0;
        while (u + 1 < unit_cnt && v >= step * 0.9995) {
                v /= step;
                u++;
        }
        if (u == 0)
                snprintf(buf, bufsz, "%" PRIu64 "%s%s", n, *units[0] ? sep : "", units[0]);
        else
                snprintf(buf, bufsz, v >= 99.95 ? "%.0f%s%s" : v >= 9.995 ? "%.1f%s%s" : "%.2f%s%s", v,
                         sep, units[u]);
        return buf;
}

const char *plan_human_count(uint64_t n, char *buf, size_t bufsz)
{
        static const char *const units[] = {"", "thousand", "million", "billion", "trillion"};
        return human(n, units, 5, 1000.0, " ", buf, bufsz);
}

const char *plan_human_bytes(uint64_t n, char *buf, size_t bufsz)
{
        static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
        return human(n, units, 7, 1000.0, " ", buf, bufsz);
}

/* Average bytes a row of dedupd.keys takes now (table, indexes, TOAST),
 * into *row_bytes with how it was found; 0 when measured, 1 when the
 * estimate stands. */
static int measure_row(struct store *s, const struct config *cfg, double *row_bytes, char *how,
                       size_t howsz)
{
        const char *params[1] = {cfg->namespace};
        PGresult *r = NULL;
        char err[512], size[32], cnt[32];
        long long total = 0, rows = 0, ns_rows = -1;
        double reltuples;

        *row_bytes = PLAN_DEFAULT_ROW_BYTES;
        if (!s || !store_ok(s)) {
                snprintf(how, howsz, "estimated (the seed's 100 B a row: key + status + times); "
                                     "no database connection to measure it");
                return 1;
        }
        if (store_query(s,
                  "SELECT to_regclass('dedupd.keys') IS NOT NULL,"
                  " coalesce(pg_total_relation_size(to_regclass('dedupd.keys')), 0),"
                  " coalesce((SELECT reltuples FROM pg_class WHERE oid = to_regclass('dedupd.keys')), -1)",
                  0, NULL, &r, err, sizeof(err)))
                goto estimate;
        if (strcmp(PQgetvalue(r, 0, 0), "t")) {
                PQclear(r);
                snprintf(err, sizeof(err), "dedupd.keys does not exist yet");
                goto estimate;
        }
        total = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        reltuples = strtod(PQgetvalue(r, 0, 2), NULL);
        PQclear(r);
        if (reltuples >= 1e6) {
                /* count(*) over a billion rows is no planning tool: ANALYZE's estimate. */
                rows = (long long)reltuples;
        } else {
                if (store_query(s, "SELECT count(*), count(*) FILTER (WHERE namespace = $1) FROM dedupd.keys",
                          1, params, &r, err, sizeof(err)))
                        goto estimate;
                rows = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
                ns_rows = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
                PQclear(r);
        }
        if (rows <= 0) {
                snprintf(err, sizeof(err), "dedupd.keys has no rows yet");
                goto estimate;
        }
        if (rows < PLAN_MIN_MEASURED_ROWS) {
                snprintf(err, sizeof(err),
                         "dedupd.keys has only %lld rows, too few to measure one (a table and each of "
                         "its indexes take whole 8 kB pages); measured from %d rows on",
                         rows, PLAN_MIN_MEASURED_ROWS);
                goto estimate;
        }
        *row_bytes = (double)total / (double)rows;
        plan_human_bytes((uint64_t)total, size, sizeof(size));
        if (ns_rows >= 0)
                snprintf(cnt, sizeof(cnt), "%lld", ns_rows);
        snprintf(how, howsz,
                 "measured: pg_total_relation_size('dedupd.keys') = %lld B (%s) / %lld rows %s over "
                 "all namespaces%s%s%s (table, indexes and TOAST as they are now, bloat included)",
                 total, size, rows, ns_rows >= 0 ? "counted" : "(ANALYZE's estimate)",
                 ns_rows >= 0 ? ", " : "", ns_rows >= 0 ? cnt : "",
                 ns_rows >= 0 ? " of them in this namespace" : "");
        return 0;
estimate:
        snprintf(how, howsz, "estimated (the seed's 100 B a row: key + status + times): %s", err);
        return 1;
}

/* A plain text table: column widths from the cells. */
#define PLAN_COLS 5
struct table {
        char (*cell)[PLAN_COLS][96];
        size_t rows, cap;
};

static int table_add(struct table *t, const char *const *cells)
{
        if (t->rows == t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 8;
                void *n = realloc(t->cell, cap * sizeof(*t->cell));
                if (!n)
                        return -1;
                t->cell = n;
                t->cap = cap;
        }
        for (int c = 0; c < PLAN_COLS; c++)
                snprintf(t->cell[t->rows][c], sizeof(t->cell[0][0]), "%s", cells[c]);
        t->rows++;
        return 0;
}

static void table_print(const struct table *t, FILE *out)
{
        int w[PLAN_COLS] = {0};
        for (size_t r = 0; r < t->rows; r++)
                for (int c = 0; c < PLAN_COLS; c++)
                        if ((int)strlen(t->cell[r][c]) > w[c])
                                w[c] = (int)strlen(t->cell[r][c]);
        for (size_t r = 0; r < t->rows; r++) {
                for (int c = 0; c + 1 < PLAN_COLS; c++)
                        fprintf(out, "%-*s   ", w[c], t->cell[r][c]);
                fprintf(out, "%s\n", t->cell[r][PLAN_COLS - 1]);
        }
}

/* Names of the topics using class c (or, c NULL, using none), comma-separated. */
static void topics_of(const struct config *cfg, const struct retention_class *c, char *buf, size_t bufsz)
{
        size_t off = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                if (cfg->topics[i].retention == c && off < bufsz)
                        off += (size_t)snprintf(buf + off, bufsz - off, "%s%s", off ? "," : "",
                                                cfg->topics[i].name);
        if (!off)
                snprintf(buf, bufsz, "(none)");
}

int retention_plan(const struct config *cfg, struct store *s, double rate_per_s, FILE *out,
                   char *err, size_t errsz)
{
        struct table t = {0};
        char how[512], keep[64], topics[96], rows_s[96], bytes_s[96], h1[32], h2[32];
        double row_bytes;
        uint64_t rows, bytes;
        int rc = -1, forever = 0;

        measure_row(s, cfg, &row_bytes, how, sizeof(how));
        if (plan_class(rate_per_s, 86400000, row_bytes, &rows, &bytes)) {
                snprintf(err, errsz, "the rate is too large to plan for");
                return -1;
        }
        fprintf(out, "namespace %s: %.10g new keys/s (%s a day) into each class\n"
                     "(an upper bound: a duplicate adds no row)\n",
                cfg->namespace, rate_per_s, plan_human_count(rows, h1, sizeof(h1)));
        fprintf(out, "row size: %.0f B, %s\n\n", row_bytes, how);

        if (table_add(&t, (const char *const[]){"class", "keep", "topics", "rows kept", "on disk"}))
                goto oom;
        for (size_t i = 0; i < cfg->class_cnt; i++) {
                const struct retention_class *c = &cfg->classes[i];
                if (plan_class(rate_per_s, c->keep_ms, row_bytes, &rows, &bytes)) {
                        snprintf(err, errsz, "class '%s': the rate is too large to plan for", c->name);
                        goto out;
                }
                config_format_duration(c->keep_ms, h1, sizeof(h1));
                if (c->keep_ms >= 86400000 && c->keep_ms % 3600000 == 0)
                        snprintf(keep, sizeof(keep), "%s (%" PRId64 "h, %" PRId64 " s)", h1,
                                 c->keep_ms / 3600000, c->keep_ms / 1000);
                else
                        snprintf(keep, sizeof(keep), "%s (%" PRId64 " s)", h1, c->keep_ms / 1000);
                topics_of(cfg, c, topics, sizeof(topics));
                snprintf(rows_s, sizeof(rows_s), "%" PRIu64 " (%s)", rows,
                         plan_human_count(rows, h1, sizeof(h1)));
                snprintf(bytes_s, sizeof(bytes_s), "%" PRIu64 " B (%s)", bytes,
                         plan_human_bytes(bytes, h2, sizeof(h2)));
                if (table_add(&t, (const char *const[]){c->name, keep, topics, rows_s, bytes_s}))
                        goto oom;
        }
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                forever += cfg->topics[i].retention == NULL;
        if (forever) {
                /* No class: the table only grows. Its growth per day is the plan. */
                if (plan_class(rate_per_s, 86400000, row_bytes, &rows, &bytes))
                        goto oom;
                topics_of(cfg, NULL, topics, sizeof(topics));
                snprintf(rows_s, sizeof(rows_s), "+%" PRIu64 " a day (%s)", rows,
                         plan_human_count(rows, h1, sizeof(h1)));
                snprintf(bytes_s, sizeof(bytes_s), "+%" PRIu64 " B a day (%s)", bytes,
                         plan_human_bytes(bytes, h2, sizeof(h2)));
                if (table_add(&t, (const char *const[]){"-", "forever", topics, rows_s, bytes_s}))
                        goto oom;
        }
        if (!cfg->class_cnt)
                fprintf(out, "no retention classes: keys are kept forever and dedupd.keys grows without "
                             "bound (add retention_classes: and retention: per topic)\n");
        table_print(&t, out);
        if (forever && cfg->class_cnt)
                fprintf(out, "topics without retention: keep their keys forever\n");
        rc = 0;
        goto out;
oom:
        snprintf(err, errsz, "out of memory");
out:
        free(t.cell);
        return rc;
}
