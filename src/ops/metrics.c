/* metrics: what dedupd counts for its operators — every metric's name, help and labels in one place. */
#include "ops/metrics.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "ops/registry.h"

#define SECONDS_BUCKETS                                                                                                \
        .buckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}, .nbuckets = 13
#define SIZE_BUCKETS .buckets = {1, 5, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000}, .nbuckets = 11

enum family {
        BUILD_INFO,
        MESSAGES,
        MISMATCHES,
        BATCH_MESSAGES,
        BATCH_SECONDS,
        BATCH_RETRIES,
        DB_ERRORS,
        LAG,
        QUARANTINES,
        TAKEOVERS,
        EXPIRED,
        RECONCILED,
        FAILED_RETRIED,
        OUTBOX_BACKLOG,
        OUTBOX_PUBLISHED,
        OUTBOX_FAILURES,
        OUTBOX_GIVEN_UP_TOTAL,
        OUTBOX_GIVEN_UP,
        OUTBOX_PURGED,
        PURGED_KEYS,
        PURGED_RESPONSES,
        PURGE_LAST,
        PENDING,
        PENDING_AGE,
        READY,
        SPLITS,
        CLAIM_CONFLICTS,
        REPLIES_REFUSED,
        HANDLER_REFUSALS,
        DUPES_SAMPLED,
        DUPE_DELAY,
        ABSORB_KEYS,
        ABSORB_EFFECTS,
        ABSORB_VIOLATIONS,
        ABSORB_LAST,
        TENANT_MESSAGES,
        TENANT_REFUSED,
        FAMILIES
};

static const struct metric_def defs[FAMILIES] = {
        [BUILD_INFO] = {.name = "dedupd_build_info",
                        .type = METRIC_GAUGE,
                        .help = "dedupd's version, handler ABI and the libraries it runs on",
                        .labels = {"version", "handler_abi", "broker_client", "libpq"}},
        [MESSAGES] = {.name = "dedupd_messages_total",
                      .type = METRIC_COUNTER,
                      .help = "Messages in committed batches, by outcome: applied (the effect ran), duplicate "
                              "(absorbed, the first "
                              "outcome kept), rejected (the handler said no, recorded), dead_lettered",
                      .labels = {"topic", "outcome"}},
        [MISMATCHES] = {.name = "dedupd_fingerprint_mismatches_total",
                        .type = METRIC_COUNTER,
                        .help = "Messages whose key was seen with another payload (absorbed or dead-lettered)",
                        .labels = {"topic"}},
        [BATCH_MESSAGES] = {.name = "dedupd_batch_messages",
                            .type = METRIC_HISTOGRAM,
                            .help = "Messages per committed batch",
                            .labels = {"topic"},
                            SIZE_BUCKETS},
        [BATCH_SECONDS] = {.name = "dedupd_batch_duration_seconds",
                           .type = METRIC_HISTOGRAM,
                           .help = "Time from a batch's BEGIN to its COMMIT (the handler included)",
                           .labels = {"topic"},
                           SECONDS_BUCKETS},
        [BATCH_RETRIES] = {.name = "dedupd_batch_retries_total",
                           .type = METRIC_COUNTER,
                           .help = "Batches rolled back to be retried",
                           .labels = {"topic"}},
        [DB_ERRORS] = {.name = "dedupd_db_errors_total",
                       .type = METRIC_COUNTER,
                       .help = "Failed database statements, by SQLSTATE class (none: no SQLSTATE, e.g. the connection "
                               "is gone)",
                       .labels = {"class"}},
        [LAG] = {.name = "dedupd_consumer_lag",
                 .type = METRIC_GAUGE,
                 .help = "Messages of a partition not yet committed (librdkafka's consumer_lag)",
                 .labels = {"topic", "partition"}},
        [QUARANTINES] =
                {.name = "dedupd_quarantines_total",
                 .type = METRIC_COUNTER,
                 .help = "Messages the crash-loop guard ran alone after the process died while they were in flight",
                 .labels = {"topic"}},
        [TAKEOVERS] = {.name = "dedupd_lease_takeovers_total",
                       .type = METRIC_COUNTER,
                       .help = "External mode: PENDING keys taken over after their owner's lease expired",
                       .labels = {"topic"}},
        [EXPIRED] = {.name = "dedupd_keys_expired_total",
                     .type = METRIC_COUNTER,
                     .help = "External mode: PENDING keys the reaper marked EXPIRED",
                     .labels = {"topic"}},
        [RECONCILED] = {.name = "dedupd_reconcile_total",
                        .type = METRIC_COUNTER,
                        .help = "External mode: in-doubt (EXPIRED) keys the handler's reconcile() was asked about, by "
                                "answer: done, failed, reexecute, unknown (asked again later), error (the answer could "
                                "not be recorded)",
                        .labels = {"topic", "answer"}},
        [FAILED_RETRIED] = {.name = "dedupd_failed_retried_total",
                            .type = METRIC_COUNTER,
                            .help = "FAILED keys run again by on_failed: retry (in committed batches)",
                            .labels = {"topic"}},
        [OUTBOX_BACKLOG] = {.name = "dedupd_outbox_backlog",
                            .type = METRIC_GAUGE,
                            .help = "Outbox rows committed but not yet published (given-up rows not counted)"},
        [OUTBOX_PUBLISHED] = {.name = "dedupd_outbox_published_total",
                              .type = METRIC_COUNTER,
                              .help = "Outbox rows the broker acknowledged, marked sent"},
        [OUTBOX_FAILURES] =
                {.name = "dedupd_outbox_publish_failures_total",
                 .type = METRIC_COUNTER,
                 .help = "Publishes of an outbox row the broker refused (each retried after a backoff, or given up)"},
        [OUTBOX_GIVEN_UP_TOTAL] = {.name = "dedupd_outbox_given_up_total",
                                   .type = METRIC_COUNTER,
                                   .help = "Outbox rows given up after outbox.max_failures failed publishes"},
        [OUTBOX_GIVEN_UP] = {.name = "dedupd_outbox_given_up",
                             .type = METRIC_GAUGE,
                             .help = "Outbox rows given up and kept, waiting for dedupctl outbox retry or drop"},
        [OUTBOX_PURGED] = {.name = "dedupd_outbox_purged_total",
                           .type = METRIC_COUNTER,
                           .help = "Sent outbox rows deleted by purge after outbox.keep"},
        [PURGED_KEYS] = {.name = "dedupd_purged_keys_total",
                         .type = METRIC_COUNTER,
                         .help = "Expired keys deleted by purge"},
        [PURGED_RESPONSES] = {.name = "dedupd_purged_responses_total",
                              .type = METRIC_COUNTER,
                              .help = "Responses cleared after their response_ttl"},
        [PURGE_LAST] = {.name = "dedupd_purge_last_run_timestamp_seconds",
                        .type = METRIC_GAUGE,
                        .help = "When the last purge run finished (Unix time)"},
        [PENDING] = {.name = "dedupd_pending_keys",
                     .type = METRIC_GAUGE,
                     .help = "Keys in PENDING (external mode: effects in flight)"},
        [PENDING_AGE] = {.name = "dedupd_pending_oldest_age_seconds",
                         .type = METRIC_GAUGE,
                         .help = "Age of the oldest PENDING key"},
        [READY] = {.name = "dedupd_ready",
                   .type = METRIC_GAUGE,
                   .help = "1 when the instance is ready (as /readyz answers), else 0"},
        [SPLITS] = {.name = "dedupd_batch_splits_total",
                    .type = METRIC_COUNTER,
                    .help = "Batches that failed without a message named (a value dedupd's own statements refused, "
                            "a handler that broke the transaction) and were split to find the one",
                    .labels = {"topic"}},
        [CLAIM_CONFLICTS] =
                {.name = "dedupd_claim_conflicts_total",
                 .type = METRIC_COUNTER,
                 .help = "Transactional mode: batches whose keys another transaction committed between the look "
                         "and the insert (a zombie, a second instance during a rebalance), rolled back and "
                         "retried at once with a pessimistic claim",
                 .labels = {"topic"}},
        [REPLIES_REFUSED] =
                {.name = "dedupd_replies_refused_total",
                 .type = METRIC_COUNTER,
                 .help = "Replies not sent, in committed batches, the message applied without one: invalid (a reply-to "
                         "the broker cannot "
                         "take: not UTF-8, not a legal name, too long) or not_allowed (outside reply.allow)",
                 .labels = {"topic", "reason"}},
        [HANDLER_REFUSALS] =
                {.name = "dedupd_handler_calls_refused_total",
                 .type = METRIC_COUNTER,
                 .help = "Host calls refused for a value dedupd cannot store or publish (a response that is not "
                         "UTF-8, an emit to an illegal destination), in messages whose outcome committed: the "
                         "call returned -1",
                 .labels = {"call"}},
        [DUPES_SAMPLED] = {.name = "dedupd_duplicates_sampled_total",
                           .type = METRIC_COUNTER,
                           .help = "Absorbed duplicates recorded by provenance.every (a sample), by origin: "
                                   "redelivery (that very message again), same-partition (the producer sent it "
                                   "twice), other-partition, other-topic; and by provenance.header's value (its "
                                   "first 10 values, the rest other; none: no header)",
                           .labels = {"topic", "origin", "source"}},
        [DUPE_DELAY] = {.name = "dedupd_duplicate_delay_seconds",
                        .type = METRIC_HISTOGRAM,
                        .help = "Sampled duplicates: time since their key's first delivery was claimed",
                        .labels = {"topic"},
                        .buckets = {0.01, 0.1, 1, 10, 60, 600, 3600, 21600, 86400, 604800},
                        .nbuckets = 10},
        [ABSORB_KEYS] = {.name = "dedupd_absorption_sampled_keys",
                         .type = METRIC_GAUGE,
                         .help = "The last absorption check: DONE keys it sampled (absorption_check)",
                         .labels = {"topic"}},
        [ABSORB_EFFECTS] = {.name = "dedupd_absorption_effects",
                            .type = METRIC_GAUGE,
                            .help = "The last absorption check: the effects of the sampled keys in the handler's "
                                    "evidence table (equal to dedupd_absorption_sampled_keys when every DONE key "
                                    "has one effect and no FAILED key has any)",
                            .labels = {"topic"}},
        [ABSORB_VIOLATIONS] = {.name = "dedupd_absorption_violations",
                               .type = METRIC_GAUGE,
                               .help = "The last absorption check: sampled keys dedupctl verify would report (a "
                                       "DONE key with no effect or a second one, a FAILED key with one)",
                               .labels = {"topic"}},
        [ABSORB_LAST] = {.name = "dedupd_absorption_check_timestamp_seconds",
                         .type = METRIC_GAUGE,
                         .help = "When the absorption check of the topic last ran (Unix time)",
                         .labels = {"topic"}},
        [TENANT_MESSAGES] = {.name = "dedupd_tenant_messages_total",
                             .type = METRIC_COUNTER,
                             .help = "Messages of topics with tenants in committed batches, by tenant (the first "
                                     "tenant.metrics_top seen, the rest other; none: no tenant) and outcome as in "
                                     "dedupd_messages_total",
                             .labels = {"topic", "tenant", "outcome"}},
        [TENANT_REFUSED] = {.name = "dedupd_tenant_quota_refused_total",
                            .type = METRIC_COUNTER,
                            .help = "New keys dead-lettered because their tenant held its tenant.quota of live keys",
                            .labels = {"topic", "tenant"}},
};

/* Values that get a label of their own: the first `max` seen, the rest
 * "other" (a bounded number of series). */
#define LABELS_MAX 1000
struct label_set {
        char *v[LABELS_MAX];
        size_t n;
};
static struct label_set sources, tenants;
static pthread_mutex_t labels_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *bounded_label(struct label_set *ls, const char *value, size_t max)
{
        const char *label = "other";
        if (max > LABELS_MAX)
                max = LABELS_MAX;
        pthread_mutex_lock(&labels_lock);
        for (size_t i = 0; i < ls->n; i++)
                if (!strcmp(ls->v[i], value))
                        label = ls->v[i];
        if (!strcmp(label, "other") && ls->n < max)
                label = ls->v[ls->n++] = xstrdup(value);
        pthread_mutex_unlock(&labels_lock);
        return label;
}

static void labels_free(struct label_set *ls)
{
        for (size_t i = 0; i < ls->n; i++)
                free(ls->v[i]);
        ls->n = 0;
}

static struct registry *reg;
static struct metric *fam[FAMILIES];

void metrics_init(void)
{
        if (reg)
                return;
        reg = registry_new();
        for (size_t i = 0; i < FAMILIES; i++) {
                fam[i] = registry_add(reg, &defs[i]);
                if (!defs[i].labels[0] && i != PURGE_LAST && i != PENDING_AGE)
                        metric_set(fam[i], NULL, 0); /* exists from the first scrape */
        }
}

void metrics_free(void)
{
        registry_free(reg);
        reg = NULL;
        labels_free(&sources);
        labels_free(&tenants);
        memset(fam, 0, sizeof(fam));
}

char *metrics_render(void) { return reg ? registry_render(reg) : NULL; }

static void inc(enum family f, const char *const *labels, double by)
{
        if (reg && by != 0)
                metric_inc(fam[f], labels, by);
}

static void set(enum family f, const char *const *labels, double v)
{
        if (reg)
                metric_set(fam[f], labels, v);
}

void metrics_build_info(const char *version, const char *handler_abi, const char *broker_client, const char *libpq)
{
        set(BUILD_INFO, (const char *const[]){version, handler_abi, broker_client, libpq}, 1);
}

static const char *const outcomes[] = {"applied", "duplicate", "rejected", "dead_lettered"};

void metrics_topic(const char *topic)
{
        if (!reg)
                return;
        for (size_t i = 0; i < sizeof(outcomes) / sizeof(*outcomes); i++)
                metric_inc(fam[MESSAGES], (const char *const[]){topic, outcomes[i]}, 0);
        static const enum family per_topic[] = {MISMATCHES, BATCH_RETRIES, QUARANTINES,    TAKEOVERS,
                                                EXPIRED,    SPLITS,        CLAIM_CONFLICTS};
        for (size_t i = 0; i < sizeof(per_topic) / sizeof(*per_topic); i++)
                metric_inc(fam[per_topic[i]], (const char *const[]){topic}, 0);
}

void metrics_messages(const char *topic, const char *outcome, uint64_t n)
{
        inc(MESSAGES, (const char *const[]){topic, outcome}, (double)n);
}

void metrics_mismatches(const char *topic, uint64_t n) { inc(MISMATCHES, (const char *const[]){topic}, (double)n); }

void metrics_batch(const char *topic, size_t messages, double seconds)
{
        if (!reg)
                return;
        metric_observe(fam[BATCH_MESSAGES], (const char *const[]){topic}, (double)messages);
        metric_observe(fam[BATCH_SECONDS], (const char *const[]){topic}, seconds);
}

void metrics_batch_retry(const char *topic) { inc(BATCH_RETRIES, (const char *const[]){topic}, 1); }

void metrics_db_error(const char *sqlstate)
{
        char cls[3] = "";
        if (sqlstate && strlen(sqlstate) >= 2)
                snprintf(cls, sizeof(cls), "%.2s", sqlstate);
        inc(DB_ERRORS, (const char *const[]){cls[0] ? cls : "none"}, 1);
}

void metrics_lag(const char *topic, int32_t partition, int64_t lag)
{
        char part[16];
        if (!reg)
                return;
        snprintf(part, sizeof(part), "%" PRId32, partition);
        if (lag < 0)
                metric_forget(fam[LAG], (const char *const[]){topic, part});
        else
                metric_set(fam[LAG], (const char *const[]){topic, part}, (double)lag);
}

void metrics_quarantine(const char *topic) { inc(QUARANTINES, (const char *const[]){topic}, 1); }

void metrics_takeover(const char *topic) { inc(TAKEOVERS, (const char *const[]){topic}, 1); }

void metrics_expired(const char *topic, uint64_t n) { inc(EXPIRED, (const char *const[]){topic}, (double)n); }

void metrics_failed_retried(const char *topic, uint64_t n)
{
        inc(FAILED_RETRIED, (const char *const[]){topic}, (double)n);
}

void metrics_reconciled(const char *topic, const char *answer)
{
        inc(RECONCILED, (const char *const[]){topic, answer}, 1);
}

void metrics_outbox_backlog(uint64_t rows) { set(OUTBOX_BACKLOG, NULL, (double)rows); }

void metrics_outbox_given_up_rows(uint64_t rows) { set(OUTBOX_GIVEN_UP, NULL, (double)rows); }

void metrics_outbox_published(uint64_t rows) { inc(OUTBOX_PUBLISHED, NULL, (double)rows); }

void metrics_outbox_failed(uint64_t rows) { inc(OUTBOX_FAILURES, NULL, (double)rows); }

void metrics_outbox_given_up(uint64_t rows) { inc(OUTBOX_GIVEN_UP_TOTAL, NULL, (double)rows); }

void metrics_purge(uint64_t keys, uint64_t responses, uint64_t outbox_rows, double unix_time)
{
        inc(PURGED_KEYS, NULL, (double)keys);
        inc(PURGED_RESPONSES, NULL, (double)responses);
        inc(OUTBOX_PURGED, NULL, (double)outbox_rows);
        set(PURGE_LAST, NULL, unix_time);
}

void metrics_pending(uint64_t keys, double oldest_age)
{
        set(PENDING, NULL, (double)keys);
        set(PENDING_AGE, NULL, oldest_age);
}

void metrics_ready(int ready) { set(READY, NULL, ready ? 1 : 0); }

void metrics_split(const char *topic) { inc(SPLITS, (const char *const[]){topic}, 1); }

void metrics_claim_conflict(const char *topic) { inc(CLAIM_CONFLICTS, (const char *const[]){topic}, 1); }

void metrics_reply_refused(const char *topic, const char *reason)
{
        inc(REPLIES_REFUSED, (const char *const[]){topic, reason}, 1);
}

void metrics_handler_refusals(const char *call, uint64_t n)
{
        inc(HANDLER_REFUSALS, (const char *const[]){call}, (double)n);
}

void metrics_duplicate_sampled(const char *topic, const char *origin, const char *source, double delay_seconds)
{
        if (!reg)
                return;
        inc(DUPES_SAMPLED, (const char *const[]){topic, origin, source ? bounded_label(&sources, source, 10) : "none"},
            1);
        metric_observe(fam[DUPE_DELAY], (const char *const[]){topic}, delay_seconds);
}

void metrics_absorption(const char *topic, uint64_t keys, uint64_t effects, uint64_t violations, double unix_time)
{
        const char *const l[] = {topic};
        set(ABSORB_KEYS, l, (double)keys);
        set(ABSORB_EFFECTS, l, (double)effects);
        set(ABSORB_VIOLATIONS, l, (double)violations);
        set(ABSORB_LAST, l, unix_time);
}

void metrics_tenant_message(const char *topic, const char *tenant, const char *outcome, int over_quota, int top)
{
        if (!reg)
                return;
        const char *label = tenant ? bounded_label(&tenants, tenant, top > 0 ? (size_t)top : 0) : "none";
        inc(TENANT_MESSAGES, (const char *const[]){topic, label, outcome}, 1);
        if (over_quota)
                inc(TENANT_REFUSED, (const char *const[]){topic, label}, 1);
}
