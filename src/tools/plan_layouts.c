/* plan_layouts: each layout's cost of retention (tools/plan_layouts.h). */
#include "tools/plan_layouts.h"

#include <inttypes.h>
#include <time.h>

#include "core/buckets.h"
#include "tools/plan.h"
#include "tools/text_table.h"

#define DAY_MS 86400000LL

static int64_t now_ms(void) { return (int64_t)time(NULL) * 1000; }

/* "1728000000 (1.73 billion)" and "172800000000 B (173 GB)" */
static void amounts(uint64_t rows, uint64_t bytes, char *r, char *b)
{
        char h1[32], h2[32];
        snprintf(r, TEXT_TABLE_CELL, "%" PRIu64 " (%s)", rows, plan_human_count(rows, h1, sizeof(h1)));
        snprintf(b, TEXT_TABLE_CELL, "%" PRIu64 " B (%s)", bytes, plan_human_bytes(bytes, h2, sizeof(h2)));
}

static int heap_row(struct text_table *t, const struct retention_class *c, double rate, double row_bytes)
{
        char r[TEXT_TABLE_CELL], b[TEXT_TABLE_CELL], work[TEXT_TABLE_CELL], h[32];
        uint64_t rows, bytes, a_day, unused;
        if (plan_class(rate, c->keep_ms, row_bytes, &rows, &bytes) || plan_class(rate, DAY_MS, 0, &a_day, &unused))
                return -1;
        amounts(rows, bytes, r, b);
        snprintf(work, sizeof(work), "DELETE %s rows (each in the WAL, then vacuumed)",
                 plan_human_count(a_day, h, sizeof(h)));
        text_table_add(t, (const char *const[]){c->name, "heap", r, b, work, "dedupd.keys"});
        return 0;
}

/* Under partitioned every key stays until its bucket ended the namespace's
 * longest keep + skew ago: a class no topic uses, its own keep + skew. */
static int64_t kept_ms(const struct config *cfg, const struct retention_class *c)
{
        int64_t ns = buckets_keep_ms(cfg);
        int64_t own = c->keep_ms + cfg->keys_skew_ms;
        return ns > own ? ns : own;
}

static int partitioned_row(struct text_table *t, const struct config *cfg, const struct retention_class *c, double rate,
                           double row_bytes)
{
        char r[TEXT_TABLE_CELL], b[TEXT_TABLE_CELL], work[TEXT_TABLE_CELL], tables[TEXT_TABLE_CELL], w[32];
        uint64_t rows, bytes;
        if (plan_class(rate, kept_ms(cfg, c) + cfg->keys_bucket_ms, row_bytes + PLAN_BUCKET_LABEL_BYTES, &rows, &bytes))
                return -1;
        amounts(rows, bytes, r, b);
        config_format_duration(cfg->keys_bucket_ms, w, sizeof(w));
        snprintf(work, sizeof(work), "DROP TABLE one partition every %s (no row deleted)", w);
        snprintf(tables, sizeof(tables), "%" PRId64 " partitions of dedupd.keys_p", buckets_live(cfg, now_ms()));
        text_table_add(t, (const char *const[]){c->name, "partitioned", r, b, work, tables});
        return 0;
}

int plan_layouts_print(const struct config *cfg, double rate_per_s, double row_bytes, FILE *out)
{
        struct text_table t = {.cols = 6};
        char w[32], skew[32];
        if (!cfg->class_cnt)
                return 0;
        text_table_add(&t, (const char *const[]){"class", "layout", "rows kept at most", "on disk at most",
                                                 "expiry's work a day", "tables"});
        for (size_t i = 0; i < cfg->class_cnt; i++)
                if (heap_row(&t, &cfg->classes[i], rate_per_s, row_bytes) ||
                    partitioned_row(&t, cfg, &cfg->classes[i], rate_per_s, row_bytes)) {
                        text_table_free(&t);
                        return -1;
                }
        fprintf(out,
                "\nretention in each keys.layout (this config's: %s; partitioned with bucket %s, skew %s: a "
                "partition goes when its bucket ended the longest keep + skew ago; a key is %.0f B more)\n",
                cfg->keys_layout == LAYOUT_PARTITIONED ? "partitioned" : "heap",
                config_format_duration(cfg->keys_bucket_ms, w, sizeof(w)),
                config_format_duration(cfg->keys_skew_ms, skew, sizeof(skew)), PLAN_BUCKET_LABEL_BYTES);
        text_table_print(&t, out);
        text_table_free(&t);
        return 0;
}
