/* plan: what dedupd.keys will hold — rows and bytes per retention class at a rate of new keys. */
#include "tools/plan.h"

#include "base/mem.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pg/layout.h"
#include "pg/purge.h"
#include "pg/store.h"
#include "tools/plan_layouts.h"
#include "tools/text_table.h"

/* Fewer rows than this say more about 8 kB pages than about a row. */
#define PLAN_MIN_MEASURED_ROWS 10000

int plan_class(double rate_per_s, int64_t keep_ms, double row_bytes, uint64_t *rows, uint64_t *bytes)
{
        double r, b;
        if (!isfinite(rate_per_s) || !isfinite(row_bytes) || rate_per_s < 0 || keep_ms < 0 || row_bytes < 0)
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
        static const struct {
                const char *unit;
                double secs;
        } units[] = {
                {"", 1},         {"/s", 1},  {"/sec", 1},  {"/second", 1},  {"/min", 60},
                {"/minute", 60}, {"/m", 60}, {"/h", 3600}, {"/hour", 3600},
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

static const char *human(uint64_t n, const char *const *units, size_t unit_cnt, double step, const char *sep, char *buf,
                         size_t bufsz)
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
                snprintf(buf, bufsz, v >= 99.95 ? "%.0f%s%s" : v >= 9.995 ? "%.1f%s%s" : "%.2f%s%s", v, sep, units[u]);
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
static int measure_row(struct store *s, const struct config *cfg, double *row_bytes, char *how, size_t howsz)
{
        struct keys_size ks;
        char err[512], size[32], cnt[32];

        *row_bytes = PLAN_DEFAULT_ROW_BYTES;
        if (!s || !store_ok(s)) {
                snprintf(how, howsz,
                         "estimated (the seed's 100 B a row: key + status + times); "
                         "no database connection to measure it");
                return 1;
        }
        if (store_keys_size(s, cfg->namespace, &ks, err, sizeof(err)))
                goto estimate;
        if (!ks.exists) {
                snprintf(err, sizeof(err), "%s does not exist yet", keys_layout_table());
                goto estimate;
        }
        if (ks.rows <= 0) {
                snprintf(err, sizeof(err), "%s has no rows yet", keys_layout_table());
                goto estimate;
        }
        if (ks.rows < PLAN_MIN_MEASURED_ROWS) {
                snprintf(err, sizeof(err),
                         "%s has only %" PRId64 " rows, too few to measure one (a table and each of "
                         "its indexes take whole 8 kB pages); measured from %d rows on",
                         keys_layout_table(), ks.rows, PLAN_MIN_MEASURED_ROWS);
                goto estimate;
        }
        *row_bytes = (double)ks.total_bytes / (double)ks.rows;
        plan_human_bytes((uint64_t)ks.total_bytes, size, sizeof(size));
        if (ks.ns_rows >= 0)
                snprintf(cnt, sizeof(cnt), "%" PRId64, ks.ns_rows);
        snprintf(how, howsz,
                 "measured: pg_total_relation_size(%s) = %" PRId64 " B (%s) / %" PRId64 " rows %s over "
                 "all namespaces%s%s%s (table, indexes and TOAST as they are now, bloat included)",
                 keys_layout_get() == KEYS_PARTITIONED ? "of dedupd.keys_p's partitions" : "'dedupd.keys'",
                 ks.total_bytes, size, ks.rows, ks.ns_rows >= 0 ? "counted" : "(ANALYZE's estimate)",
                 ks.ns_rows >= 0 ? ", " : "", ks.ns_rows >= 0 ? cnt : "",
                 ks.ns_rows >= 0 ? " of them in this namespace" : "");
        return 0;
estimate:
        snprintf(how, howsz, "estimated (the seed's 100 B a row: key + status + times): %s", err);
        return 1;
}

/* Names of the topics using class c (or, c NULL, using none), comma-separated. */
static void topics_of(const struct config *cfg, const struct retention_class *c, char *buf, size_t bufsz)
{
        size_t off = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                if (cfg->topics[i].retention == c && off < bufsz)
                        off += (size_t)snprintf(buf + off, bufsz - off, "%s%s", off ? "," : "", cfg->topics[i].name);
        if (!off)
                snprintf(buf, bufsz, "(none)");
}

/* "2d (48h, 172800 s)" */
static void keep_text(int64_t keep_ms, char *buf, size_t sz)
{
        char d[32];
        config_format_duration(keep_ms, d, sizeof(d));
        if (keep_ms >= 86400000 && keep_ms % 3600000 == 0)
                snprintf(buf, sz, "%s (%" PRId64 "h, %" PRId64 " s)", d, keep_ms / 3600000, keep_ms / 1000);
        else
                snprintf(buf, sz, "%s (%" PRId64 " s)", d, keep_ms / 1000);
}

/* The row of one class: rows and bytes kept at the rate; -1 when too large. */
static int class_row(struct text_table *t, const struct config *cfg, const struct retention_class *c, double rate_per_s,
                     double row_bytes)
{
        char keep[64], topics[96], rows_s[96], bytes_s[96], h1[32], h2[32];
        uint64_t rows, bytes;
        if (plan_class(rate_per_s, c->keep_ms, row_bytes, &rows, &bytes))
                return -1;
        keep_text(c->keep_ms, keep, sizeof(keep));
        topics_of(cfg, c, topics, sizeof(topics));
        snprintf(rows_s, sizeof(rows_s), "%" PRIu64 " (%s)", rows, plan_human_count(rows, h1, sizeof(h1)));
        snprintf(bytes_s, sizeof(bytes_s), "%" PRIu64 " B (%s)", bytes, plan_human_bytes(bytes, h2, sizeof(h2)));
        text_table_add(t, (const char *const[]){c->name, keep, topics, rows_s, bytes_s});
        return 0;
}

/* Topics without a class: the table only grows; its growth per day is the plan. */
static void forever_row(struct text_table *t, const struct config *cfg, uint64_t rows_a_day, uint64_t bytes_a_day)
{
        char topics[96], rows_s[96], bytes_s[96], h1[32], h2[32];
        topics_of(cfg, NULL, topics, sizeof(topics));
        snprintf(rows_s, sizeof(rows_s), "+%" PRIu64 " a day (%s)", rows_a_day,
                 plan_human_count(rows_a_day, h1, sizeof(h1)));
        snprintf(bytes_s, sizeof(bytes_s), "+%" PRIu64 " B a day (%s)", bytes_a_day,
                 plan_human_bytes(bytes_a_day, h2, sizeof(h2)));
        text_table_add(t, (const char *const[]){"-", "forever", topics, rows_s, bytes_s});
}

int plan_print(const struct config *cfg, struct store *s, double rate_per_s, FILE *out, char *err, size_t errsz)
{
        struct text_table t = {.cols = 5};
        char how[512], h1[32];
        double row_bytes;
        uint64_t rows, bytes;
        int forever = 0;

        measure_row(s, cfg, &row_bytes, how, sizeof(how));
        if (plan_class(rate_per_s, 86400000, row_bytes, &rows, &bytes)) {
                snprintf(err, errsz, "the rate is too large to plan for");
                return -1;
        }
        fprintf(out,
                "namespace %s: %.10g new keys/s (%s a day) into each class\n"
                "(an upper bound: a duplicate adds no row)\n",
                cfg->namespace, rate_per_s, plan_human_count(rows, h1, sizeof(h1)));
        fprintf(out, "row size: %.0f B, %s\n\n", row_bytes, how);
        text_table_add(&t, (const char *const[]){"class", "keep", "topics", "rows kept", "on disk"});
        for (size_t i = 0; i < cfg->class_cnt; i++)
                if (class_row(&t, cfg, &cfg->classes[i], rate_per_s, row_bytes)) {
                        snprintf(err, errsz, "class '%s': the rate is too large to plan for", cfg->classes[i].name);
                        text_table_free(&t);
                        return -1;
                }
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                forever += cfg->topics[i].retention == NULL;
        if (forever)
                forever_row(&t, cfg, rows, bytes);
        if (!cfg->class_cnt)
                fprintf(out, "no retention classes: keys are kept forever and dedupd.keys grows without "
                             "bound (add retention_classes: and retention: per topic)\n");
        text_table_print(&t, out);
        if (forever && cfg->class_cnt)
                fprintf(out, "topics without retention: keep their keys forever\n");
        text_table_free(&t);
        if (plan_layouts_print(cfg, rate_per_s, row_bytes, out)) {
                snprintf(err, errsz, "the rate is too large to plan for");
                return -1;
        }
        return 0;
}
