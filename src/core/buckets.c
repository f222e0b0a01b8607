/* buckets: a key's bucket, the horizon of what can be proved, the partitions kept between (core/buckets.h). */
#include "core/buckets.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/bucket_time.h"
#include "base/keyspec.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/utf8.h"
#include "pg/key_buckets.h"

#define TICK_EVERY_MS (10 * 60 * 1000)
#define DROP_AT_ONCE 64

/* The end of the latest dropped bucket, as read at start and after each
 * drop: one namespace per process, read by every worker. */
static _Atomic int64_t dropped_until = KEY_BUCKET_NONE;
static int64_t next_tick_ms;

static int64_t width_days(const struct config *cfg) { return cfg->keys_bucket_ms / BUCKET_DAY_MS; }

static int64_t wall_ms(void)
{
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

int64_t buckets_keep_ms(const struct config *cfg)
{
        int64_t keep = 0;
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                if (cfg->topics[i].retention && cfg->topics[i].retention->keep_ms > keep)
                        keep = cfg->topics[i].retention->keep_ms;
        return keep + cfg->keys_skew_ms;
}

int64_t buckets_horizon(const struct config *cfg, int64_t now_ms)
{
        int64_t w = width_days(cfg);
        /* The first bucket whose end is less than keep + skew ago. */
        int64_t b = bucket_start(bucket_day_of(now_ms - buckets_keep_ms(cfg)), w);
        if ((b + w) * BUCKET_DAY_MS <= now_ms - buckets_keep_ms(cfg))
                b += w;
        int64_t d = atomic_load(&dropped_until);
        return d != KEY_BUCKET_NONE && d > b ? d : b;
}

/* "@YYYY-MM-DD|" before *s, in place. */
static void prefix(char **s, const char *label)
{
        char *p;
        if (!*s)
                return;
        p = xasprintf("%s%s", label, *s);
        free(*s);
        *s = p;
}

/* The message's time: bucket_from's value, or its own timestamp. */
static int message_time(const struct topic_conf *t, const struct pl_msg *m, const struct record *in, int64_t *ms,
                        char **why)
{
        char err[512];
        json_t *root = NULL;
        char *v = NULL;
        if (!t->bucket_keytmpl) {
                *ms = m->timestamp_ms > 0 ? m->timestamp_ms : wall_ms();
                return 0;
        }
        if (!keytmpl_needs_json(t->bucket_keytmpl) || (root = keyspec_load_json(in, err, sizeof(err))))
                v = keytmpl_render(t->bucket_keytmpl, in, root, err, sizeof(err));
        json_decref(root);
        if (v && bucket_time_parse(v, ms, err, sizeof(err))) {
                *why = utf8_text_ok(v, strlen(v)) && strlen(v) <= 64 ? xasprintf("bucket_from: '%s' is %s", v, err)
                                                                     : xasprintf("bucket_from: %s", err);
                free(v);
                return -1;
        }
        if (!v) {
                *why = xasprintf("bucket_from: %s", err);
                return -1;
        }
        free(v);
        return 0;
}

/* Too far ahead, or too old to prove: the reason, or NULL. */
static char *out_of_reach(const struct config *cfg, int64_t ms, int64_t bucket, int64_t now_ms)
{
        char date[11], skew[32], keep[32];
        bucket_date(bucket, date);
        config_format_duration(cfg->keys_skew_ms, skew, sizeof(skew));
        if (ms > now_ms + cfg->keys_skew_ms)
                return xasprintf("bucket %s: its time is more than keys.skew (%s) ahead of now", date, skew);
        if (bucket < buckets_horizon(cfg, now_ms))
                return xasprintf("too old to prove: bucket %s ended more than keep + keys.skew (%s) ago, its keys' "
                                 "partition is dropped or was never kept",
                                 date, config_format_duration(buckets_keep_ms(cfg), keep, sizeof(keep)));
        return NULL;
}

int buckets_key(const struct config *cfg, const struct topic_conf *t, const struct pl_msg *m, const struct record *in,
                struct pl_state *st, char **why)
{
        char label[BUCKET_LABEL_SIZE];
        int64_t ms, now_ms = wall_ms(), w = width_days(cfg);
        if (cfg->keys_layout != LAYOUT_PARTITIONED)
                return 0;
        if (message_time(t, m, in, &ms, why))
                return 1;
        int64_t bucket = bucket_start(bucket_day_of(ms), w);
        if ((*why = out_of_reach(cfg, ms, bucket, now_ms)))
                return 1;
        bucket_label(bucket, label);
        if (!t->bucket_keytmpl && ms - bucket * BUCKET_DAY_MS < cfg->keys_skew_ms &&
            bucket - w >= buckets_horizon(cfg, now_ms)) {
                char before[BUCKET_LABEL_SIZE];
                bucket_label(bucket - w, before);
                free(st->prev_key);
                st->prev_key = xasprintf("%s%s", before, st->idem_key);
        } else {
                prefix(&st->prev_key, label);
        }
        prefix(&st->idem_key, label);
        prefix(&st->key_text, label);
        return 0;
}

/* The end (exclusive) of the partitions made ahead: skew and one bucket past
 * now. */
static int64_t ahead_end(const struct config *cfg, int64_t now_ms)
{
        int64_t w = width_days(cfg);
        return bucket_start(bucket_day_of(now_ms + cfg->keys_skew_ms), w) + 2 * w;
}

int64_t buckets_live(const struct config *cfg, int64_t now_ms)
{
        return (ahead_end(cfg, now_ms) - buckets_horizon(cfg, now_ms)) / width_days(cfg);
}

/* The partitions from the horizon through skew and one bucket ahead. */
static int ensure(struct store *s, const struct config *cfg, int64_t now_ms, char *err, size_t errsz)
{
        int created = 0;
        int64_t w = width_days(cfg);
        if (store_key_buckets_ensure(s, cfg->namespace, buckets_horizon(cfg, now_ms), ahead_end(cfg, now_ms) - w, w,
                                     &created, err, errsz))
                return -1;
        if (created)
                log_info("buckets", "made %d partition(s) of dedupd.keys_p for namespace %s", created, cfg->namespace);
        return 0;
}

static int read_dropped(struct store *s, const struct config *cfg, char *err, size_t errsz)
{
        int64_t until;
        if (store_key_buckets_dropped_until(s, cfg->namespace, &until, err, errsz))
                return -1;
        atomic_store(&dropped_until, until);
        return 0;
}

int buckets_prepare(struct store *s, const struct config *cfg, char *err, size_t errsz)
{
        int other = 0, partitioned = cfg->keys_layout == LAYOUT_PARTITIONED;
        char why[512];
        if (store_keys_in_other_layout(s, cfg->namespace, partitioned, &other, why, sizeof(why))) {
                snprintf(err, errsz, "keys.layout: %s", why);
                return -1;
        }
        if (other) {
                snprintf(err, errsz,
                         "keys.layout is %s but namespace '%s' has keys in %s: they would not be found, and every "
                         "duplicate of them would run again; keep the layout, or start a new namespace",
                         partitioned ? "partitioned" : "heap", cfg->namespace,
                         partitioned ? "dedupd.keys (keys.layout: heap)" : "dedupd.keys_p (keys.layout: partitioned)");
                return -1;
        }
        if (!partitioned)
                return 0;
        if (read_dropped(s, cfg, why, sizeof(why)) || ensure(s, cfg, wall_ms(), why, sizeof(why))) {
                snprintf(err, errsz, "keys.layout: partitioned: %s", why);
                return -1;
        }
        return 0;
}

void buckets_tick(struct store *s, const struct config *cfg, int64_t now_ms)
{
        char err[512];
        if (cfg->keys_layout != LAYOUT_PARTITIONED || now_ms < next_tick_ms || !store_idle(s))
                return;
        next_tick_ms = now_ms + TICK_EVERY_MS;
        /* another instance's purge may have dropped buckets: from now on
         * theirs are too old to prove here too, not a statement that fails */
        if (read_dropped(s, cfg, err, sizeof(err)) || ensure(s, cfg, wall_ms(), err, sizeof(err)))
                log_warn("buckets",
                         "reading the dropped buckets or making the partitions ahead failed (retrying in "
                         "10 minutes): %s",
                         err);
}

int buckets_drop_expired(struct store *s, const struct config *cfg, int64_t deadline_ms, int64_t *partitions,
                         int64_t *rows, char *err, size_t errsz)
{
        int64_t days[DROP_AT_ONCE], n_rows;
        size_t n = 0;
        char date[11];
        if (cfg->keys_layout != LAYOUT_PARTITIONED)
                return 0;
        int64_t before = buckets_horizon(cfg, wall_ms());
        if (store_key_buckets_ended(s, cfg->namespace, before, days, DROP_AT_ONCE, &n, err, errsz))
                return -1;
        for (size_t i = 0; i < n && (!deadline_ms || log_now_ms() < deadline_ms); i++) {
                if (store_key_buckets_drop(s, cfg->namespace, days[i], &n_rows, err, errsz))
                        return -1;
                if (n_rows < 0)
                        continue; /* another purger's */
                (*partitions)++;
                *rows += n_rows;
                bucket_date(days[i], date);
                log_info("buckets", "dropped the partition of bucket %s of namespace %s: %" PRId64 " key(s)", date,
                         cfg->namespace, n_rows);
        }
        return read_dropped(s, cfg, err, errsz);
}

int buckets_count_expired(struct store *s, const struct config *cfg, int64_t *partitions, char *err, size_t errsz)
{
        int64_t days[DROP_AT_ONCE];
        size_t n = 0;
        if (cfg->keys_layout != LAYOUT_PARTITIONED)
                return 0;
        if (store_key_buckets_ended(s, cfg->namespace, buckets_horizon(cfg, wall_ms()), days, DROP_AT_ONCE, &n, err,
                                    errsz))
                return -1;
        *partitions += (int64_t)n;
        return 0;
}
