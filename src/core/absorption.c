/* absorption: the continuous absorption check — dedupctl verify's proof (one effect per DONE key, none per FAILED one) run by the daemon on a sample of each topic's keys, exported as gauges. */
#include "core/absorption.h"

#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include "base/log.h"
#include "base/mem.h"
#include "core/loader.h"
#include "ops/metrics.h"
#include "pg/duplicates.h"
#include "pg/evidence.h"

/* One daemon per process: the schedule lives here. */
static struct {
        int64_t next_ms;
        struct log_ratelimit rl;
        unsigned char told[256]; /* the topics said to have no evidence, by index */
} ab;

/* What topic i's handler declared it records its effects in: dedupd.evidence
 * (set_evidence at init), else its descriptor. 0 when it declared nothing. */
static int evidence_of(const struct config *cfg, struct store *s, struct pipeline *pl, size_t i, char **table,
                       char **column, char *err, size_t errsz)
{
        char *handler = NULL;
        *table = *column = NULL;
        if (store_evidence_declared(s, cfg->namespace, cfg->topics[i].name, &handler, table, column, err, errsz))
                return -1;
        free(handler);
        const struct handler *h = pl ? pipeline_handler(pl, i) : NULL;
        const struct dedupd_handler *d = h ? h->desc : NULL;
        if (!*table && d && DEDUPD_HANDLER_HAS(d, evidence_table) && d->evidence_table) {
                *table = xstrdup(d->evidence_table);
                *column = xstrdup(DEDUPD_HANDLER_HAS(d, evidence_key_column) && d->evidence_key_column
                                          ? d->evidence_key_column
                                          : "idem_key");
        }
        return *table ? 1 : 0;
}

static void check_topic(const struct config *cfg, struct store *s, struct pipeline *pl, size_t i)
{
        const char *topic = cfg->topics[i].name;
        char *table, *column, err[512], bad[256];
        struct store_absorption a;
        int got = evidence_of(cfg, s, pl, i, &table, &column, err, sizeof(err));
        if (got == 0 && i < sizeof(ab.told) && !ab.told[i] && (ab.told[i] = 1))
                log_info("absorption",
                         "topic %s: its handler declares no evidence table: the absorption check "
                         "skips it",
                         topic);
        if (got == 1 && store_evidence_names_ok(table, column, bad, sizeof(bad)))
                got = -1, snprintf(err, sizeof(err), "%s", bad);
        if (got == 1 && store_absorption_sample(s, cfg->namespace, topic, table, column, cfg->absorption_sample, &a,
                                                err, sizeof(err)))
                got = -1;
        if (got < 0)
                log_limited(&ab.rl, 1, 60000, LOG_WARN, "absorption", "topic %s: the check did not run: %s", topic,
                            err);
        if (got == 1) {
                metrics_absorption(topic, (uint64_t)a.done, (uint64_t)a.effects, (uint64_t)a.violations,
                                   (double)time(NULL));
                if (a.violations)
                        log_error("absorption",
                                  "topic %s: %" PRId64 " of %" PRId64
                                  " sampled keys break the one-effect rule in %s(%s)"
                                  ": %s%s; dedupctl verify lists them all",
                                  topic, a.violations, a.keys, table, column, a.examples,
                                  a.violations > 3 ? ", ..." : "");
                else
                        log_debug("absorption",
                                  "topic %s: %" PRId64 " keys sampled, %" PRId64 " DONE, %" PRId64 " effects: absorbed",
                                  topic, a.keys, a.done, a.effects);
        }
        free(table);
        free(column);
}

void absorption_tick(const struct config *cfg, struct store *s, struct pipeline *pl, int64_t now_ms)
{
        if (cfg->absorption_interval_ms <= 0)
                return;
        if (!ab.next_ms) { /* not at start: a fleet restarting at once would check at once */
                ab.next_ms = now_ms + cfg->absorption_interval_ms;
                return;
        }
        if (now_ms < ab.next_ms || !store_idle(s))
                return;
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                check_topic(cfg, s, pl, i);
        ab.next_ms = log_now_ms() + cfg->absorption_interval_ms;
}
