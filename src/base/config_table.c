/* config_table: the declarative table of every setting — a row is the whole truth about one key (type, default, bounds, names, meaning). */
#include "base/config_impl.h"

#include <pthread.h>
#include <stddef.h>

#include "base/hostport.h"
#include "base/keyspec.h"
#include "base/log.h"

#define TOFF(m) offsetof(struct topic_conf, m)
#define COFF(m) offsetof(struct config, m)
#define ROFF(m) offsetof(struct retention_class, m)

static const struct enum_name modes[] = {
        {"transactional", MODE_TRANSACTIONAL, 0}, {"external", MODE_EXTERNAL, 0}, {NULL, 0, 0}};
static const struct enum_name on_expired_names[] = {{"dead-letter", EXPIRED_DEAD_LETTER, 0},
                                                    {"skip", EXPIRED_SKIP, 0},
                                                    {"reexecute", EXPIRED_REEXECUTE, 0},
                                                    {NULL, 0, 0}};
static const struct enum_name layout_names[] = {
        {"heap", LAYOUT_HEAP, 0}, {"partitioned", LAYOUT_PARTITIONED, 0}, {NULL, 0, 0}};
static const struct enum_name on_failed_names[] = {
        {"absorb", FAILED_ABSORB, 0}, {"retry", FAILED_RETRY, 0}, {NULL, 0, 0}};
static const struct enum_name on_mismatch_names[] = {
        {"absorb", MISMATCH_ABSORB, 0}, {"dead-letter", MISMATCH_DEAD_LETTER, 0}, {NULL, 0, 0}};
static const struct enum_name log_levels[] = {
        {"error", LOG_ERROR, 0}, {"warn", LOG_WARN, 0}, {"info", LOG_INFO, 0}, {"debug", LOG_DEBUG, 0}, {NULL, 0, 0}};
/* source: one name per broker of the broker table (config_rows fills it). */
static struct enum_name sources[CONFIG_BROKERS_MAX + 1];
static const struct enum_name log_formats[] = {
        {"human", LOG_FORMAT_HUMAN, 0}, {"json", LOG_FORMAT_JSON, 0}, {NULL, 0, 0}};

static const struct field previous_key_fields[] = {
        {.name = "subject",
         .type = F_STR,
         .off = TOFF(key_prev_subject),
         .check = keyspec_template_check,
         .desc = "The previous version's subject"},
        {.name = "action",
         .type = F_STR,
         .off = TOFF(key_prev_action),
         .check = keyspec_template_check,
         .desc = "The previous version's action"},
        {.name = "request",
         .type = F_STR,
         .off = TOFF(key_prev_request),
         .check = keyspec_template_check,
         .desc = "The previous version's request"},
        {.name = "until",
         .type = F_STR,
         .off = TOFF(key_prev_until),
         .desc = "When the window ends (ISO-8601 with a zone, or epoch milliseconds): after it only the current "
                 "version's key is claimed; at least as long as the old keys' retention.keep is the safe choice"},
        {.name = NULL},
};

static const struct field key_fields[] = {
        {.name = "subject",
         .importance = 1,
         .type = F_STR,
         .off = TOFF(key_subject),
         .required = 1,
         .check = keyspec_template_check,
         .desc = "The business entity: \"{json:order_id}\", \"{header:NAME}\", \"{key}\", literals, or a mix"},
        {.name = "action",
         .importance = 1,
         .type = F_STR,
         .off = TOFF(key_action),
         .check = keyspec_template_check,
         .desc = "What is done to the subject, usually a literal such as PAY"},
        {.name = "request",
         .importance = 1,
         .type = F_STR,
         .off = TOFF(key_request),
         .check = keyspec_template_check,
         .desc = "Optional caller-generated request id reused on retry, e.g. \"{header:request-id}\""},
        {.name = "version",
         .type = F_INT,
         .off = TOFF(key_version),
         .def = "1",
         .min = 1,
         .max = 1000000,
         .desc = "The key template's version: raise it when subject, action or request change, and keep the "
                 "old template under previous"},
        {.name = "previous",
         .type = F_SECTION,
         .sub = previous_key_fields,
         .desc = "The template of version - 1: until the given time the claim also looks for the key it builds, "
                 "so changing how keys are built lets no duplicate through"},
        {.name = NULL},
};

static const struct field handler_fields[] = {
        {.name = "path",
         .importance = 1,
         .type = F_STR,
         .off = TOFF(handler_path),
         .required = 1,
         .desc = "Path of the handler shared object (relative paths are relative to the working directory)"},
        {.name = "config",
         .importance = 1,
         .type = F_TREE,
         .off = TOFF(handler_config),
         .desc = "Free-form subtree passed to the handler's init()"},
        {.name = "per_message",
         .importance = 3,
         .type = F_BOOL,
         .off = TOFF(handler_per_message),
         .def = "false",
         .desc = "Call handle() one message at a time even when the handler has handle_batch (to compare the "
                 "two, or to debug)"},
        {.name = NULL},
};

static const struct field batch_fields[] = {
        {.name = "max_messages",
         .importance = 1,
         .type = F_INT,
         .off = TOFF(batch_max_messages),
         .def = "500",
         .min = 1,
         .max = 100000,
         .reload = 1,
         .desc = "Most messages in one batch (one PostgreSQL transaction)"},
        {.name = "max_wait_ms",
         .type = F_INT,
         .off = TOFF(batch_max_wait_ms),
         .def = "100",
         .min = 0,
         .max = 60000,
         .reload = 1,
         .desc = "Longest time a batch waits to fill before it is processed"},
        {.name = "adaptive",
         .importance = 3,
         .type = F_BOOL,
         .off = TOFF(batch_adaptive),
         .def = "true",
         .reload = 1,
         .desc = "Process a partial batch as soon as the consumer has nothing more queued, so at low rates "
                 "a message does not wait max_wait_ms for others; false waits for a full batch or max_wait_ms"},
        {.name = "timeout_ms",
         .type = F_INT,
         .off = TOFF(batch_timeout_ms),
         .def = "30000",
         .min = 100,
         .max = 3600000,
         .desc = "Watchdog: a batch still running after this long is aborted (its SQL cancelled, then the "
                 "process ended so the database rolls it back); keep it well below max.poll.interval.ms"},
        {.name = NULL},
};

static const struct field retry_fields[] = {
        {.name = "max_attempts",
         .importance = 1,
         .type = F_INT,
         .off = TOFF(retry_max_attempts),
         .def = "5",
         .min = 1,
         .max = 1000,
         .desc = "Attempts for a message whose handler returns RETRY before it is dead-lettered"},
        {.name = "backoff_ms",
         .type = F_INT,
         .off = TOFF(retry_backoff_ms),
         .def = "200",
         .min = 0,
         .max = 600000,
         .desc = "First backoff after a failed batch; doubles on every retry"},
        {.name = "backoff_max_ms",
         .type = F_INT,
         .off = TOFF(retry_backoff_max_ms),
         .def = "10000",
         .min = 0,
         .max = 3600000,
         .desc = "Longest backoff"},
        {.name = "max_crashes",
         .type = F_INT,
         .off = TOFF(retry_max_crashes),
         .def = "3",
         .min = 1,
         .max = 1000,
         .desc = "Process crashes (or watchdog aborts) that include one message before it is dead-lettered as "
                 "a crash loop"},
        {.name = NULL},
};

static const struct field dlq_fields[] = {
        {.name = "topic",
         .importance = 1,
         .type = F_STR,
         .off = TOFF(dlq_topic),
         .desc = "Dead-letter topic (default: <topic>.dlq); must exist unless create is true"},
        {.name = "create",
         .type = F_BOOL,
         .off = TOFF(dlq_create),
         .def = "false",
         .desc = "Create the dead-letter topic at start when it is missing (broker's default partitions and "
                 "replication, max.message.bytes sized to hold whatever the topic holds)"},
        {.name = NULL},
};

static const struct field external_fields[] = {
        {.name = "lease_ms",
         .type = F_DURATION,
         .off = TOFF(lease_ms),
         .def = "30s",
         .min = 1,
         .desc = "How long a claimed PENDING key belongs to its owner; a duplicate meeting a live lease backs off"},
        {.name = "expire_after",
         .type = F_DURATION,
         .off = TOFF(expire_grace_ms),
         .def = "10m",
         .desc = "The reaper marks a PENDING key EXPIRED (in doubt) this long after its lease ran out"},
        {.name = "on_expired",
         .type = F_ENUM,
         .off = TOFF(on_expired),
         .def = "dead-letter",
         .names = on_expired_names,
         .desc = "A message whose key is EXPIRED: dead-letter (for reconciliation), skip, or reexecute"},
        {.name = "reconcile",
         .type = F_BOOL,
         .off = TOFF(reconcile),
         .def = "true",
         .desc = "Ask the handler's reconcile() (ABI 1.3, when it has one) whether an EXPIRED key's effect happened, "
                 "before on_expired applies; false: on_expired alone"},
        {.name = "reconcile_tries",
         .type = F_INT,
         .off = TOFF(reconcile_tries),
         .def = "5",
         .min = 1,
         .max = 1000,
         .desc = "A handler with reconcile(): how many times an EXPIRED key is asked before it is left to "
                 "on_expired for good"},
        {.name = "reconcile_budget",
         .type = F_INT,
         .off = TOFF(reconcile_budget),
         .def = "100",
         .min = 1,
         .max = 100000,
         .desc = "A handler with reconcile(): most keys the reaper asks about per topic and round (every 5 s)"},
        {.name = NULL},
};

static const struct field parallel_fields[] = {
        {.name = "key",
         .importance = 1,
         .type = F_STR,
         .off = TOFF(parallel_key),
         .check = keyspec_template_check,
         .desc = "What splits a partition's batch: messages with the same value run on the same worker, in offset "
                 "order, e.g. \"{json:user_id}\"; a message without it is dead-lettered"},
        {.name = "workers",
         .importance = 1,
         .type = F_INT,
         .off = TOFF(parallel_workers),
         .def = "1",
         .min = 1,
         .max = 64,
         .desc = "Sub-batches of one batch that run at once, each on a database connection and in a transaction of "
                 "its own: the daemon needs workers (top level) times this many connections; 1: off"},
        {.name = NULL},
};

static const struct field fingerprint_fields[] = {
        {.name = "fields",
         .type = F_TREE,
         .off = TOFF(fingerprint_fields),
         .desc = "List of JSON paths fingerprinted instead of the whole payload, e.g. [user_id, amount]"},
        {.name = "on_mismatch",
         .type = F_ENUM,
         .off = TOFF(on_mismatch),
         .def = "absorb",
         .names = on_mismatch_names,
         .desc = "Same key, different fingerprint: absorb (count and log) or dead-letter with both fingerprints"},
        {.name = NULL},
};

static const struct field reply_fields[] = {
        {.name = "header",
         .type = F_STR,
         .off = TOFF(reply_header),
         .def = "reply-to",
         .empty_ok = 1,
         .desc = "Header naming the reply topic; \"\" disables replies"},
        {.name = "correlation_header",
         .type = F_STR,
         .off = TOFF(correlation_header),
         .def = "correlation-id",
         .desc = "Header copied to the reply (and used as its Kafka key)"},
        {.name = "allow",
         .importance = 1,
         .type = F_TREE,
         .off = TOFF(reply_allow),
         .desc = "Where replies may go: a list of names, an entry ending in * a prefix (\"replies.*\"; \"*\": "
                 "anywhere); a reply elsewhere is not sent (logged, counted; the message is applied). Unset: any "
                 "destination, with a warning. Never to dedupd's own topics or the broker's internal names"},
        {.name = NULL},
};

static const struct field tenant_fields[] = {
        {.name = "key",
         .importance = 1,
         .type = F_STR,
         .off = TOFF(tenant_key),
         .check = keyspec_template_check,
         .desc = "Whose message it is, e.g. \"{header:tenant-id}\" or \"{json:tenant}\": 1 to 64 of A-Z a-z 0-9 . _ -, "
                 "put before the key (\"acme:9527/PAY\"), so tenants never share a key; a message without one, or "
                 "with another, is dead-lettered"},
        {.name = "quota",
         .type = F_INT,
         .off = TOFF(tenant_quota),
         .def = "0",
         .min = 0,
         .max = 2000000000,
         .desc = "Live keys a tenant may hold in this topic (claimed and not yet purged); a new key past it is "
                 "dead-lettered with the reason, its duplicates still absorbed, other tenants unaffected; 0: none"},
        {.name = "quotas",
         .type = F_TREE,
         .off = TOFF(tenant_quotas),
         .desc = "Per tenant, its own quota, e.g. {acme: 5000000, trial: 1000} (0: none)"},
        {.name = "retention",
         .type = F_TREE,
         .off = TOFF(tenant_retention),
         .desc = "Per tenant, its own retention class, e.g. {acme: seven_years}: its keys expire by that class; it "
                 "must keep at least as long as the topic's own retention (which the broker's retention is checked "
                 "against)"},
        {.name = "metrics_top",
         .type = F_INT,
         .off = TOFF(tenant_metrics_top),
         .def = "10",
         .min = 0,
         .max = 1000,
         .desc = "Tenants that get a label of their own on dedupd_tenant_messages_total (the first seen); the rest "
                 "are counted as \"other\""},
        {.name = NULL},
};

static const struct field keys_fields[] = {
        {.name = "layout",
         .type = F_ENUM,
         .off = COFF(keys_layout),
         .def = "heap",
         .names = layout_names,
         .desc = "heap: every key in dedupd.keys, expired keys deleted row by row; partitioned: keys in "
                 "dedupd.keys_p, one partition per bucket, each key beginning with its bucket "
                 "(\"@2026-12-01|9527/PAY\"), "
                 "and retention drops whole partitions (docs/partitioned-retention.md). A namespace's keys are in one "
                 "layout: dedupctl check refuses a change while the other holds keys"},
        {.name = "bucket",
         .type = F_DURATION,
         .off = COFF(keys_bucket_ms),
         .def = "1d",
         .min = 86400000,
         .step = 86400000,
         .desc = "A bucket's width, in whole days: one partition each; fewer, larger buckets for a long keep "
                 "(7y of 1d buckets is 2,557 partitions: use 30d)"},
        {.name = "skew",
         .type = F_DURATION,
         .off = COFF(keys_skew_ms),
         .def = "1d",
         .min = 0,
         .desc = "How far a message's time may be from now: one more than skew in the future is dead-lettered; a "
                 "partition is dropped keep + skew after its bucket ends, and a message whose bucket is past that "
                 "is dead-lettered \"too old to prove\"; with the message's own timestamp, one within skew of its "
                 "bucket's start is also looked up in the bucket before"},
        {.name = NULL},
};

static const struct field provenance_fields[] = {
        {.name = "every",
         .type = F_INT,
         .off = TOFF(provenance_every),
         .def = "100",
         .min = 0,
         .max = 1000000,
         .desc = "One absorbed duplicate in this many (chosen by its key and position, so every run picks the same) "
                 "is recorded in dedupd.duplicates with where it came from; 1: each; 0: none"},
        {.name = "header",
         .type = F_STR,
         .off = TOFF(provenance_header),
         .def = "",
         .desc = "The header naming who produced a message (e.g. \"producer-id\"): recorded with each sampled "
                 "duplicate and a label of dedupd_duplicates_sampled_total (its first 10 values, the rest "
                 "\"other\"); \"\": none"},
        {.name = NULL},
};

const struct field config_topic_fields[] = {
        {.name = "name",
         .importance = 1,
         .type = F_STR,
         .off = TOFF(name),
         .required = 1,
         .desc = "The topic to consume (on NATS a subject of nats.stream, on RabbitMQ a queue)"},
        {.name = "key",
         .importance = 1,
         .type = F_SECTION,
         .required = 1,
         .sub = key_fields,
         .desc = "How the idempotency key subject/action[/request] is built"},
        {.name = "handler",
         .importance = 1,
         .type = F_SECTION,
         .required = 1,
         .sub = handler_fields,
         .desc = "The handler shared object"},
        {.name = "batch", .type = F_SECTION, .sub = batch_fields, .desc = "Batch limits"},
        {.name = "retry", .type = F_SECTION, .sub = retry_fields, .desc = "Retry budget for handler RETRY results"},
        {.name = "dead_letter", .type = F_SECTION, .sub = dlq_fields, .desc = "Where unprocessable messages go"},
        {.name = "max_payload_bytes",
         .type = F_INT,
         .off = TOFF(max_payload_bytes),
         .min = 1,
         .max = 1000000000,
         .desc = "This topic's limits.payload_bytes (default: that one): larger payloads are dead-lettered "
                 "unprocessed; the dead-letter topic must hold this plus 16 KiB"},
        {.name = "mode",
         .importance = 1,
         .type = F_ENUM,
         .off = TOFF(mode),
         .def = "transactional",
         .names = modes,
         .desc = "transactional (the handler's effect commits with the key) or external (effects outside "
                 "PostgreSQL: claim PENDING with a lease, run, finish; docs/design.md §6)"},
        {.name = "external", .type = F_SECTION, .sub = external_fields, .desc = "Settings of mode: external"},
        {.name = "on_failed",
         .type = F_ENUM,
         .off = TOFF(on_failed),
         .def = "absorb",
         .names = on_failed_names,
         .desc = "A message whose key is FAILED (the handler rejected it): absorb (it gets the first rejection, "
                 "for ever: right for money) or retry (once on_failed_after has passed since the failure it runs "
                 "again, recorded in dedupd.reruns); transactional mode"},
        {.name = "on_failed_after",
         .type = F_DURATION,
         .off = TOFF(on_failed_after_ms),
         .def = "1h",
         .min = 1000,
         .desc = "on_failed: retry: how long after its failure a FAILED key may run again"},
        {.name = "fingerprint",
         .type = F_SECTION,
         .sub = fingerprint_fields,
         .desc = "What is fingerprinted, and what a same-key-different-fingerprint duplicate gets"},
        {.name = "reply",
         .type = F_SECTION,
         .sub = reply_fields,
         .desc = "Where a duplicate's stored first response is published again"},
        {.name = "retention",
         .importance = 1,
         .type = F_STR,
         .off = TOFF(retention_name),
         .desc = "Name of a retention class; without one, keys never expire"},
        {.name = "parallel",
         .type = F_SECTION,
         .sub = parallel_fields,
         .desc = "Parallel keys inside a partition: a batch split by key onto workers, order kept per key, the "
                 "partition's offset advancing only to what every worker committed (docs/parallel-keys.md)"},
        {.name = "bucket_from",
         .type = F_STR,
         .off = TOFF(bucket_from),
         .check = keyspec_template_check,
         .desc = "Under keys.layout: partitioned, the time a message's key belongs to, from the message itself so "
                 "every copy of it agrees, e.g. \"{json:order_date}\": a date (2026-12-01, also the start of an "
                 "ISO 8601 time) or Unix seconds or milliseconds; one without it is dead-lettered. Unset: the "
                 "message's own timestamp (a producer's resend has its own: see keys.skew)"},
        {.name = "tenant",
         .type = F_SECTION,
         .sub = tenant_fields,
         .desc = "Tenants: a key part naming whose message it is, a quota of live keys per tenant, per-tenant "
                 "metrics (docs/tenants.md); transactional mode"},
        {.name = "provenance",
         .type = F_SECTION,
         .sub = provenance_fields,
         .desc = "Where absorbed duplicates come from: a sample recorded with its origin, producer and delay "
                 "(dedupctl dupes, docs/duplicates.md)"},
        {.name = NULL},
};

const struct field config_class_fields[] = {
        {.name = "keep",
         .importance = 1,
         .type = F_DURATION,
         .off = ROFF(keep_ms),
         .required = 1,
         .min = 1,
         .desc = "How long a key is kept after it was first seen; must exceed max_retry + clock_skew + replay_window"},
        {.name = "max_retry",
         .type = F_DURATION,
         .off = ROFF(max_retry_ms),
         .def = "0",
         .desc = "Longest time over which a producer, gateway or the broker may retry a message"},
        {.name = "clock_skew",
         .type = F_DURATION,
         .off = ROFF(clock_skew_ms),
         .def = "0",
         .desc = "Allowance for clocks that disagree"},
        {.name = "replay_window",
         .type = F_DURATION,
         .off = ROFF(replay_window_ms),
         .def = "0",
         .desc = "How far back an operator may replay by hand"},
        {.name = "response_ttl",
         .type = F_DURATION,
         .off = ROFF(response_ttl_ms),
         .def = "0",
         .desc = "Drop stored responses after this (the key and fingerprint stay); 0 keeps them with the key"},
        {.name = "allow_shorter_than_topic",
         .type = F_BOOL,
         .off = ROFF(allow_shorter_than_topic),
         .def = "false",
         .desc = "Accept keep shorter than the topic's own retention.ms (a message still in the topic can be "
                 "replayed)"},
        {.name = NULL},
};

static const struct field purge_fields[] = {
        {.name = "interval_ms",
         .type = F_INT,
         .off = COFF(purge_interval_ms),
         .def = "60000",
         .min = 0,
         .max = 86400000,
         .reload = 1,
         .desc = "How often the daemon purges expired keys (0: never; use dedupctl purge)"},
        {.name = "batch",
         .importance = 3,
         .type = F_INT,
         .off = COFF(purge_batch),
         .def = "1000",
         .min = 1,
         .max = 100000,
         .reload = 1,
         .desc = "Keys deleted per statement: small batches keep locks short"},
        {.name = NULL},
};

static const struct field absorption_fields[] = {
        {.name = "interval",
         .type = F_DURATION,
         .off = COFF(absorption_interval_ms),
         .def = "5m",
         .desc = "How often the daemon checks a sample of each topic's keys against its handler's evidence "
                 "(dedupctl verify's proof: one effect per DONE key, none per FAILED one); 0: never"},
        {.name = "sample",
         .type = F_INT,
         .off = COFF(absorption_sample),
         .def = "1000",
         .min = 1,
         .max = 100000,
         .desc = "Keys per topic and check, drawn at random (TABLESAMPLE: a check reads about this many rows "
                 "however large the table)"},
        {.name = NULL},
};

static const struct field outbox_fields[] = {
        {.name = "interval_ms",
         .type = F_INT,
         .off = COFF(outbox_interval_ms),
         .def = "1000",
         .min = 10,
         .max = 600000,
         .desc = "How often the relay looks for unsent outbox rows (it also runs after every batch that emitted)"},
        {.name = "batch",
         .importance = 3,
         .type = F_INT,
         .off = COFF(outbox_batch),
         .def = "500",
         .min = 1,
         .max = 100000,
         .desc = "Outbox rows published per round"},
        {.name = "max_failures",
         .type = F_INT,
         .off = COFF(outbox_max_failures),
         .def = "10",
         .min = 1,
         .max = 1000,
         .reload = 1,
         .desc = "Publishes of one row the broker refused (no such topic, exchange or stream, too large, ...) "
                 "before the row is given up: kept with its reason, counted, listed by dedupctl outbox list. A "
                 "broker that cannot be reached counts against no row"},
        {.name = "retry_backoff_ms",
         .type = F_INT,
         .off = COFF(outbox_retry_backoff_ms),
         .def = "1000",
         .min = 0,
         .max = 3600000,
         .reload = 1,
         .desc = "Wait before a failed row is tried again; doubles with each failure. The rows behind it go on"},
        {.name = "retry_backoff_max_ms",
         .importance = 3,
         .type = F_INT,
         .off = COFF(outbox_retry_backoff_max_ms),
         .def = "300000",
         .min = 0,
         .max = 86400000,
         .reload = 1,
         .desc = "Longest wait before a failed row is tried again"},
        {.name = "publish_timeout_ms",
         .type = F_INT,
         .off = COFF(outbox_publish_timeout_ms),
         .def = "3000",
         .min = 100,
         .max = 20000,
         .desc = "Longest the relay waits for the broker to acknowledge a round of rows (dead letters keep "
                 "their own, longer wait)"},
        {.name = "keep",
         .type = F_DURATION,
         .off = COFF(outbox_keep_ms),
         .def = "7d",
         .min = 0,
         .reload = 1,
         .desc = "Sent rows are purged this long after they were sent, with the keys' purge (purge.interval_ms, "
                 "purge.batch); 0: never. Given-up rows are never purged"},
        {.name = NULL},
};

static const struct field limits_fields[] = {
        {.name = "payload_bytes",
         .type = F_INT,
         .off = COFF(limit_payload_bytes),
         .def = "1000000",
         .min = 1,
         .max = 1000000000,
         .desc = "Larger payloads are dead-lettered unprocessed (a topic's max_payload_bytes overrides it); the "
                 "dead-letter topic must hold this plus 16 KiB (Kafka's default max.message.bytes, 1048588, holds "
                 "the default)"},
        {.name = "key_bytes",
         .type = F_INT,
         .off = COFF(limit_key_bytes),
         .def = "4096",
         .min = 16,
         .max = 1048576,
         .desc = "A key longer than this (its text, before hashing) is dead-lettered; keys over 512 bytes are "
                 "stored as sha256:<hex> with their text beside them for dedupctl inspect"},
        {.name = "json_depth",
         .importance = 3,
         .type = F_INT,
         .off = COFF(limit_json_depth),
         .def = "64",
         .min = 1,
         .max = 2048,
         .desc = "A payload read as JSON (for the key or the fingerprint) nested deeper is dead-lettered before "
                 "it is parsed"},
        {.name = "headers",
         .importance = 3,
         .type = F_INT,
         .off = COFF(limit_headers),
         .def = "64",
         .min = 0,
         .max = 100000,
         .desc = "A message with more headers is dead-lettered"},
        {.name = "batch_bytes",
         .type = F_INT,
         .off = COFF(limit_batch_bytes),
         .def = "67108864",
         .min = 1024,
         .max = 2147483647,
         .desc = "Payload bytes one batch holds: a batch closes early when the next message would pass it "
                 "(a batch always takes at least one message)"},
        {.name = "outbox_backlog",
         .type = F_INT,
         .off = COFF(limit_outbox_backlog),
         .def = "100000",
         .min = 0,
         .max = 1000000000,
         .desc = "Unsent outbox rows (given-up ones not counted) at which every topic pauses fetching until the "
                 "relay has published below it again (0: never pause)"},
        {.name = NULL},
};

static const struct field http_fields[] = {
        {.name = "listen",
         .importance = 1,
         .type = F_STR,
         .off = COFF(http_listen),
         .def = "",
         .check = hostport_check,
         .desc = "Where /metrics (Prometheus), /healthz and /readyz are served, host:port (\"127.0.0.1:9400\"; port 0 "
                 "picks one and logs it); empty: no endpoints. No authentication and no TLS: keep it on loopback, "
                 "or reachable only from the Prometheus network (dedupctl check warns otherwise)"},
        {.name = "max_connections",
         .type = F_INT,
         .off = COFF(http_max_connections),
         .def = "128",
         .min = 1,
         .max = 10000,
         .desc = "Connections served at once; past it new ones wait in the kernel's backlog until one closes"},
        {.name = "max_connections_per_ip",
         .importance = 3,
         .type = F_INT,
         .off = COFF(http_max_connections_per_ip),
         .def = "8",
         .min = 1,
         .max = 10000,
         .desc = "Connections one client address may hold; more from it are closed at once, so a client that "
                 "opens many idle sockets locks out only itself"},
        {.name = "idle_timeout_s",
         .importance = 3,
         .type = F_INT,
         .off = COFF(http_idle_timeout_s),
         .def = "10",
         .min = 1,
         .max = 3600,
         .desc = "A connection that sends and receives nothing this long is closed (a scrape answers in "
                 "milliseconds)"},
        {.name = "gauges_interval_ms",
         .importance = 3,
         .type = F_INT,
         .off = COFF(http_gauges_interval_ms),
         .def = "10000",
         .min = 1000,
         .max = 3600000,
         .desc = "How often the gauges read from the database (PENDING keys, outbox backlog) are refreshed"},
        {.name = NULL},
};

static const struct field postgres_fields[] = {
        {.name = "conninfo",
         .importance = 1,
         .type = F_STR,
         .off = COFF(pg_conninfo),
         .required = 1,
         .secret = 1,
         .desc = "libpq connection string or URI; put the password in ${ENV}, ${file:/path} or ~/.pgpass (never "
                 "logged)"},
        {.name = "retry_max_ms",
         .type = F_INT,
         .off = COFF(db_retry_max_ms),
         .def = "5000",
         .min = 10,
         .max = 600000,
         .desc = "Longest wait between reconnection attempts while the database is down"},
        {.name = "probe_interval_ms",
         .type = F_INT,
         .off = COFF(db_probe_interval_ms),
         .def = "2000",
         .min = 0,
         .max = 600000,
         .reload = 1,
         .desc = "While no batch has used the connection for this long, ask the database SELECT 1 (readiness "
                 "turns false and dedupd reconnects when it does not answer); 0: never"},
        {.name = "probe_timeout_ms",
         .importance = 3,
         .type = F_INT,
         .off = COFF(db_probe_timeout_ms),
         .def = "1000",
         .min = 100,
         .max = 2000,
         .reload = 1,
         .desc = "How long that SELECT 1 may take before the database counts as lost (the loop waits that long "
                 "at most)"},
        {.name = NULL},
};

const struct field config_top_fields[] = {
        {.name = "namespace",
         .importance = 1,
         .type = F_STR,
         .off = COFF(namespace),
         .required = 1,
         .desc = "Dedup scope: the service's name. Not the consumer group, which changes with a blue/green deploy "
                 "while the dedup record must not"},
        {.name = "log_level",
         .type = F_ENUM,
         .off = COFF(log_level),
         .def = "info",
         .names = log_levels,
         .reload = 1,
         .desc = "error, warn, info or debug"},
        {.name = "log_format",
         .importance = 3,
         .type = F_ENUM,
         .off = COFF(log_format),
         .def = "human",
         .names = log_formats,
         .desc = "human (timestamp, pid, level, [context], message) or json (one object a line: ts, level, pid, "
                 "ctx, msg); dedupd --log-format overrides it"},
        {.name = "startup_timeout_ms",
         .type = F_INT,
         .off = COFF(startup_timeout_ms),
         .def = "60000",
         .min = 0,
         .max = 3600000,
         .desc = "Longest dedupd may take to reach the broker and the database and join its group; past it dedupd "
                 "exits 1 saying what it was waiting for (0: wait for ever). Keep it above session.timeout.ms: "
                 "a restart without group.instance.id waits that long for its partitions"},
        {.name = "shutdown_timeout_ms",
         .type = F_INT,
         .off = COFF(shutdown_timeout_ms),
         .def = "10000",
         .min = 0,
         .max = 600000,
         .desc = "Longest a clean shutdown may take before dedupd exits anyway"},
        {.name = "workers",
         .importance = 1,
         .type = F_INT,
         .off = COFF(workers),
         .def = "1",
         .min = 1,
         .max = 64,
         .desc = "Partition workers: each runs its partitions' batches on a thread and a database connection of "
                 "its own, so the database works on one batch while dedupd reads the next; a partition always runs "
                 "on the same worker (its order is kept). More than 1 needs transactional mode, Kafka or NATS, and "
                 "handlers that declare DEDUPD_HANDLER_F_CONCURRENT (transfer and sql do); 2 per core of the "
                 "database is a good start"},
        {.name = "source",
         .importance = 1,
         .type = F_ENUM,
         .off = COFF(source),
         .def = "kafka",
         .names = sources,
         .desc = "The broker this daemon consumes (a second broker is a second dedupd); its own settings are "
                 "under the key of its name"},
        {.name = "postgres",
         .importance = 1,
         .type = F_SECTION,
         .required = 1,
         .sub = postgres_fields,
         .desc = "The database"},
        {.name = "topics",
         .importance = 1,
         .type = F_TOPICS,
         .required = 1,
         .sub = config_topic_fields,
         .desc = "The topics to consume, one entry each"},
        {.name = "retention_classes",
         .importance = 1,
         .type = F_CLASSES,
         .sub = config_class_fields,
         .desc = "Named retention classes (docs/design.md §8); a topic names one with retention:"},
        {.name = "purge", .type = F_SECTION, .sub = purge_fields, .desc = "Deleting expired keys and sent outbox rows"},
        {.name = "outbox", .type = F_SECTION, .sub = outbox_fields, .desc = "The outbox relay"},
        {.name = "http", .type = F_SECTION, .sub = http_fields, .desc = "Metrics and health endpoints"},
        {.name = "limits",
         .type = F_SECTION,
         .sub = limits_fields,
         .desc = "What one message, one batch and the outbox may hold (docs/configuring.md: Limits)"},
        {.name = "keys",
         .type = F_SECTION,
         .sub = keys_fields,
         .desc = "How keys are kept: one table, or partitioned by bucket with retention by dropping partitions "
                 "(docs/partitioned-retention.md)"},
        {.name = "absorption_check",
         .type = F_SECTION,
         .sub = absorption_fields,
         .desc = "The continuous absorption check: effects = distinct keys on a sample, as gauges "
                 "(docs/duplicates.md)"},
        {.name = NULL},
};

/* The brokers' rows follow `postgres`, each an F_OWN row around the
 * broker's own (room for every row of CONFIG_BROKERS_MAX brokers); the
 * `source` row's names are the brokers'. */
#define TOP_ROWS_MAX 64
static struct field top_rows[TOP_ROWS_MAX];
static pthread_once_t top_rows_once = PTHREAD_ONCE_INIT;

static size_t add_broker_rows(size_t n)
{
        const struct config_broker *b;
        for (size_t i = 0; (b = config_broker_at(i)) && i < CONFIG_BROKERS_MAX; i++) {
                sources[i] = (struct enum_name){b->name, (int)i, b->test_only};
                for (const struct field *f = b->rows; f->name && n + 1 < TOP_ROWS_MAX; f++)
                        top_rows[n++] =
                                (struct field){.name = f->name, .type = F_OWN, .off = i, .sub = f, .desc = f->desc};
        }
        return n;
}

static void build_top_rows(void)
{
        size_t n = 0;
        for (const struct field *f = config_top_fields; f->name && n + 1 < TOP_ROWS_MAX; f++) {
                top_rows[n++] = *f;
                if (f->sub == postgres_fields)
                        n = add_broker_rows(n);
        }
        top_rows[n] = (struct field){.name = NULL};
}

const struct field *config_rows(void)
{
        pthread_once(&top_rows_once, build_top_rows);
        return top_rows;
}
