/* retention: when keys, progress rows and sent outbox rows may go, the daemon's purge schedule, and the rule a class must keep against its topic. */
#include "core/retention.h"

#include "core/buckets.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "ops/metrics.h"
#include "pg/store.h"

/* The daemon purges at most this long per tick, then lets the consumer poll. */
#define TICK_BUDGET_MS 500

int64_t retention_progress_keep_ms(const struct config *cfg)
{
        int64_t keep = 0;
        for (size_t i = 0; i < cfg->class_cnt; i++)
                if (cfg->classes[i].keep_ms > keep)
                        keep = cfg->classes[i].keep_ms;
        return keep > 0 ? keep : RETENTION_PROGRESS_DEFAULT_MS;
}

static int batch_of(const struct config *cfg, int batch)
{
        if (batch > 0)
                return batch;
        return cfg->purge_batch > 0 ? cfg->purge_batch : 1000;
}

int retention_purge(struct store *s, const struct config *cfg, int batch, struct purge_stats *st, char *err,
                    size_t errsz)
{
        if (store_purge(s, cfg->namespace, batch_of(cfg, batch), retention_progress_keep_ms(cfg), cfg->outbox_keep_ms,
                        0, st, err, errsz))
                return -1;
        return buckets_drop_expired(s, cfg, 0, &st->partitions, &st->partition_keys, err, errsz);
}

int retention_purge_count(struct store *s, const struct config *cfg, struct purge_stats *st, char *err, size_t errsz)
{
        if (store_purge_count(s, cfg->namespace, retention_progress_keep_ms(cfg), cfg->outbox_keep_ms, st, err, errsz))
                return -1;
        return buckets_count_expired(s, cfg, &st->partitions, err, errsz);
}

/* One daemon per process: the schedule lives here, not in the consumer. */
static int64_t next_purge_ms;
static struct log_ratelimit purge_rl;

/* ", 3 partition(s) of 2592000000 key(s)" under keys.layout: partitioned
 * when it dropped some; "" otherwise (the line as it always was). */
static const char *dropped_text(const struct purge_stats *st, char *buf, size_t sz)
{
        buf[0] = '\0';
        if (st->partitions)
                snprintf(buf, sz, ", %" PRId64 " partition(s) of %" PRId64 " key(s)", st->partitions,
                         st->partition_keys);
        return buf;
}

void retention_tick(struct store *s, const struct config *cfg, int64_t now_ms)
{
        struct purge_stats st;
        char err[512], dropped[96];
        int rc;

        if (cfg->purge_interval_ms <= 0)
                return;
        if (!next_purge_ms) {
                /* Not at start: a fleet restarting at once would purge at once. */
                next_purge_ms = now_ms + cfg->purge_interval_ms;
                return;
        }
        /* Between batches only, on an idle connection the pipeline is not using. */
        if (now_ms < next_purge_ms || !store_idle(s))
                return;
        rc = store_purge(s, cfg->namespace, batch_of(cfg, 0), retention_progress_keep_ms(cfg), cfg->outbox_keep_ms,
                         now_ms + TICK_BUDGET_MS, &st, err, sizeof(err));
        if (!rc)
                rc = buckets_drop_expired(s, cfg, now_ms + TICK_BUDGET_MS, &st.partitions, &st.partition_keys, err,
                                          sizeof(err));
        next_purge_ms = log_now_ms() + (st.more && !rc ? TICK_BUDGET_MS : cfg->purge_interval_ms);
        if (rc)
                log_limited(&purge_rl, 1, 60000, LOG_WARN, "retention", "purge failed (retrying in %d ms): %s",
                            cfg->purge_interval_ms, err);
        else
                metrics_purge((uint64_t)(st.keys + st.partition_keys), (uint64_t)st.responses, (uint64_t)st.outbox_rows,
                              (double)time(NULL));
        if (st.keys || st.responses || st.progress_rows || st.mismatch_rows || st.duplicate_rows || st.outbox_rows ||
            st.partitions)
                log_info("retention",
                         "purged %" PRId64 " expired key(s), %" PRId64 " response(s) past response_ttl, "
                         "%" PRId64 " progress_log row(s), %" PRId64 " fingerprint mismatch(es), %" PRId64
                         " sampled duplicate(s), %" PRId64 " sent outbox row(s)%s in %" PRId64 " ms%s",
                         st.keys, st.responses, st.progress_rows, st.mismatch_rows, st.duplicate_rows, st.outbox_rows,
                         dropped_text(&st, dropped, sizeof(dropped)), log_now_ms() - now_ms,
                         st.more ? "; more to go, continuing" : "");
}

/* "compact" alone keeps the last record of every Kafka key for ever. */
static int compacted(const char *cleanup_policy)
{
        return cleanup_policy && strstr(cleanup_policy, "compact") && !strstr(cleanup_policy, "delete");
}

int retention_compare(const struct retention_holder *h, const struct retention_class *c, int64_t retention_ms,
                      const char *cleanup_policy, char *msg, size_t msgsz)
{
        char keep[64], ret[64], diff[64];

        if (c->allow_shorter_than_topic)
                return 0;
        config_format_duration(c->keep_ms, keep, sizeof(keep));
        if (compacted(cleanup_policy)) {
                snprintf(msg, msgsz,
                         "%s %s: retention class '%s' keeps keys %s but the %s is compacted "
                         "(cleanup.policy=%s) and keeps the last message of every Kafka key for ever: "
                         "a message still in the %s could be replayed after its key was purged — no "
                         "keep is long enough; set allow_shorter_than_topic: true if replaying it after "
                         "%s is acceptable",
                         h->kind, h->name, c->name, keep, h->kind, cleanup_policy, h->kind, keep);
                return -1;
        }
        if (retention_ms < 0) {
                snprintf(msg, msgsz,
                         "%s %s: retention class '%s' keeps keys %s but the %s retains messages "
                         "for ever (%s): a message still in the %s could be replayed after its key was "
                         "purged — no keep is long enough; set allow_shorter_than_topic: true if "
                         "replaying it after %s is acceptable",
                         h->kind, h->name, c->name, keep, h->kind, h->setting, h->kind, keep);
                return -1;
        }
        if (c->keep_ms >= retention_ms)
                return 0;
        config_format_duration(retention_ms, ret, sizeof(ret));
        config_format_duration(retention_ms - c->keep_ms, diff, sizeof(diff));
        snprintf(msg, msgsz,
                 "%s %s: retention class '%s' keeps keys %s but the %s retains messages for %s "
                 "(%s): a message still in the %s could be replayed after its key was purged — %s "
                 "too short; set keep >= %s or allow_shorter_than_topic: true",
                 h->kind, h->name, c->name, keep, h->kind, ret, h->setting, h->kind, diff, ret);
        return -1;
}
