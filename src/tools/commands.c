/* commands: what each dedupctl command does, once its arguments are read — the functions dedupctl's command table names. */
#include "tools/commands.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/keyspec.h"
#include "core/loader.h"
#include "core/buckets.h"
#include "base/bucket_time.h"
#include "pg/key_buckets.h"
#include "core/retention.h"
#include "pg/audit.h"
#include "pg/grants.h"
#include "pg/schema.h"
#include "pg/reruns.h"
#include "pg/tenants.h"
#include "pg/store.h"
#include "source/brokers.h"
#include "tools/check.h"
#include "tools/plan.h"
#include "base/isotime.h"
#include "tools/dupes.h"
#include "tools/replay.h"
#include "tools/rows.h"
#include "tools/mismatch_report.h"
#include "tools/verify.h"

static struct store *connect_db(const struct config *cfg)
{
        char err[1024];
        struct store *s = store_open(cfg->pg_conninfo, err, sizeof(err));
        if (!s)
                fprintf(stderr, "dedupctl: %s\n", err);
        return s;
}

/* Each handler's own setup (its tables), as dedupd runs it at start. */
static int init_handlers(struct config *cfg, struct store *s)
{
        int rc = 0;
        for (size_t i = 0; i < cfg->topic_cnt && !rc; i++) {
                const struct topic_conf *t = &cfg->topics[i];
                struct handler h = {0};
                char err[1024];
                if (loader_open(&h, t->handler_path, err, sizeof(err)) ||
                    loader_init(&h, t->handler_config, s, cfg->namespace, t->name, err, sizeof(err))) {
                        fprintf(stderr, "dedupctl: topic %s: %s\n", t->name, err);
                        rc = 1;
                } else {
                        printf("topic %s: handler %s set up\n", t->name, h.desc->name ? h.desc->name : t->handler_path);
                }
                loader_close(&h);
        }
        return rc;
}

int cmd_migrate(struct config *cfg, const struct cmd_args *a)
{
        (void)a;
        struct store *s = connect_db(cfg);
        char err[1024];
        int applied, known;
        if (!s)
                return 2;
        if (store_migrate(s, err, sizeof(err))) {
                fprintf(stderr, "dedupctl: migration failed: %s\n", err);
                store_free(s);
                return 1;
        }
        if (store_schema_version(s, &applied, &known, err, sizeof(err)) == 0)
                printf("schema dedupd at version %d (of %d known)\n", applied, known);
        char report[2048];
        int differences = 0, rc = 0;
        if (store_schema_check(s, &differences, report, sizeof(report), err, sizeof(err))) {
                fprintf(stderr, "dedupctl: cannot read the schema back: %s\n", err);
                rc = 1;
        } else if (differences) {
                fprintf(stderr, "dedupctl: schema dedupd differs from its description in %d place%s: %s\n", differences,
                        differences == 1 ? "" : "s", report);
                rc = 1;
        } else {
                printf("schema dedupd: %s\n", report);
        }
        if (!rc)
                rc = init_handlers(cfg, s);
        store_free(s);
        return rc;
}

/* The statements come from the server (format %I, ::regclass): a role or
 * table name is never pasted into SQL here. */
int cmd_grant(struct config *cfg, const struct cmd_args *a)
{
        const char *role = a->role;
        const char *const *tables = a->tables;
        size_t ntables = a->table_cnt;
        int apply = a->apply;
        struct store *s = connect_db(cfg);
        struct grants g;
        char err[1024];
        int rc = 0;
        if (!s)
                return 2;
        if (store_grants(s, role, tables, ntables, &g, err, sizeof(err))) {
                fprintf(stderr, "dedupctl grant: %s\n", err);
                store_free(s);
                return 1;
        }
        for (size_t i = 0; i < g.cnt; i++)
                printf("%s;\n", g.sql[i]);
        if (apply) {
                if (store_grants_apply(s, &g, err, sizeof(err))) {
                        fprintf(stderr, "dedupctl grant: not applied (none of them): %s\n", err);
                        rc = 1;
                } else {
                        printf("applied %zu statement%s\n", g.cnt, g.cnt == 1 ? "" : "s");
                }
        }
        grants_free(&g);
        store_free(s);
        return rc;
}

/* A key's re-runs (dedupctl rerun), after its record; gone: its row went
 * with the last one and its next delivery is awaited. Returns how many, or -1. */
static int print_reruns(struct store *s, const char *ns, const char *key, int gone)
{
        PGresult *r = NULL;
        char err[512];
        if (store_rerun_history(s, ns, key, &r, err, sizeof(err)))
                return -1;
        int n = PQntuples(r);
        if (n && gone)
                printf("key %s: no record now: re-run %s, its next delivery runs the handler once more\n", key,
                       PQgetvalue(r, n - 1, 0));
        if (n) {
                printf("re-runs of %s:\n", key);
                rows_print(r);
        }
        PQclear(r);
        return n;
}

int cmd_inspect(struct config *cfg, const struct cmd_args *a)
{
        const char *key = a->words[0];
        struct store *s = connect_db(cfg);
        PGresult *r = NULL;
        char err[1024];
        int rc;
        if (!s)
                return 2;
        enum store_rc q = store_audit_key(s, cfg->namespace, key, &r, err, sizeof(err));
        if (q == STORE_OK && PQntuples(r) == 0) {
                /* Given by its text: found by the form it is stored in
                 * (sha256:<hex> beyond 512 bytes), which shows the text. */
                char stored[KEYSPEC_MAX_KEY_LEN + 1];
                keyspec_store_form(key, strlen(key), stored, sizeof(stored));
                if (strcmp(stored, key)) {
                        PQclear(r);
                        r = NULL;
                        q = store_audit_key(s, cfg->namespace, stored, &r, err, sizeof(err));
                }
        }
        int reruns = q ? 0 : print_reruns(s, cfg->namespace, key, PQntuples(r) == 0);
        if (q || reruns < 0) {
                fprintf(stderr, "dedupctl: %s\n", q ? err : "reading the key's re-runs failed");
                rc = 2;
        } else if (PQntuples(r) == 0 && !reruns) {
                fprintf(stderr, "dedupctl: key '%s' not found in namespace %s\n", key, cfg->namespace);
                if (cfg->keys_layout == LAYOUT_PARTITIONED && key[0] != '@')
                        fprintf(stderr,
                                "dedupctl: under keys.layout: partitioned a key begins with its bucket, e.g. "
                                "'@2026-12-01|%s' (dedupd's log and dead letters name it so)\n",
                                key);
                rc = 1;
        } else {
                for (int c = 0; PQntuples(r) && c < PQnfields(r); c++)
                        printf("%-19s %s\n", PQfname(r, c), PQgetisnull(r, 0, c) ? "(null)" : PQgetvalue(r, 0, c));
                rc = 0;
        }
        PQclear(r);
        store_free(s);
        return rc;
}

/* One table of stats under its title: 0, or 2 with the query's error said.
 * optional: printed only when it has rows. */
static int stats_table(enum store_rc qrc, PGresult *r, const char *err, const char *title, int optional)
{
        if (qrc != STORE_OK) {
                fprintf(stderr, "dedupctl: %s\n", err);
                return 2;
        }
        if (!optional || PQntuples(r)) {
                printf("%s:\n", title);
                rows_print(r);
        }
        PQclear(r);
        return 0;
}

/* keys.layout: partitioned: the partitions kept and dropped, and the oldest
 * bucket still provable. 0, or 2 on a database error. */
static int partitions_report(struct store *s, const struct config *cfg)
{
        struct key_buckets_summary sum;
        char err[512], from[11], to[11], horizon[11], size[32];
        if (cfg->keys_layout != LAYOUT_PARTITIONED)
                return 0;
        if (store_key_buckets_summary(s, cfg->namespace, &sum, err, sizeof(err))) {
                fprintf(stderr, "dedupctl: %s\n", err);
                return 2;
        }
        printf("\npartitions of dedupd.keys_p (keys.layout: partitioned)\n");
        if (sum.live) {
                bucket_date(sum.oldest, from);
                bucket_date(sum.newest, to);
                printf("kept:     %" PRId64 ", buckets %s to %s, %s\n", sum.live, from, to,
                       plan_human_bytes((uint64_t)sum.bytes, size, sizeof(size)));
        } else {
                printf("kept:     0 (dedupd makes them at start)\n");
        }
        printf("dropped:  %" PRId64 ", %" PRId64 " key(s) with them\n", sum.dropped, sum.dropped_rows);
        bucket_date(buckets_horizon(cfg, (int64_t)time(NULL) * 1000), horizon);
        printf("provable: from bucket %s (a message of an older one is dead-lettered \"too old to prove\")\n", horizon);
        return 0;
}

int cmd_stats(struct config *cfg, const struct cmd_args *a)
{
        (void)a;
        struct store *s = connect_db(cfg);
        PGresult *r = NULL;
        char err[1024], title[160];
        const char *ns = cfg->namespace;
        enum store_rc q;
        int rc;
        if (!s)
                return 2;
        snprintf(title, sizeof(title), "keys in namespace %s", ns);
        q = store_audit_statuses(s, ns, &r, err, sizeof(err));
        rc = stats_table(q, r, err, title, 0);
        if (!rc) {
                q = store_audit_partitions(s, ns, &r, err, sizeof(err));
                rc = stats_table(q, r, err, "progress per partition", 0);
        }
        if (!rc) {
                q = store_rerun_counts(s, ns, &r, err, sizeof(err));
                rc = stats_table(q, r, err, "re-runs (dedupctl rerun)", 1);
        }
        if (!rc) {
                q = store_tenant_summary(s, ns, 20, &r, err, sizeof(err));
                rc = stats_table(q, r, err, "tenants with the most live keys (tenant.quota counts these)", 1);
        }
        if (!rc)
                rc = partitions_report(s, cfg);
        if (!rc && mismatch_report(s, ns, err, sizeof(err))) {
                fprintf(stderr, "dedupctl: %s\n", err);
                rc = 2;
        }
        store_free(s);
        return rc;
}

static int parse_offset(const char *opt, const char *s, int64_t *out)
{
        char err[256];
        if (replay_parse_offset(s, out, err, sizeof(err))) {
                fprintf(stderr, "dedupctl: %s %s\n", opt, err);
                return -1;
        }
        return 0;
}

static int parse_time(const char *opt, const char *s, int64_t *out)
{
        char err[256];
        if (isotime_parse(s, out, err, sizeof(err))) {
                fprintf(stderr, "dedupctl: %s: %s\n", opt, err);
                return -1;
        }
        return 0;
}

/* Option combinations are checked before the config is read: exit 2. */
int cmd_replay_args(struct cmd_args *a)
{
        struct replay_opts *o = &a->replay;
        int32_t **parts = &a->parts;
        char err[256];
        int targets = a->to_beginning + !!a->to_offset + !!a->to_time;

        memset(o, 0, sizeof(*o));
        o->topic = a->topic;
        o->reproduce = a->reproduce;
        o->dry_run = a->dry_run;
        o->to_beginning = a->to_beginning;
        o->to_offset = o->to_time_ms = o->from_offset = o->from_time_ms = -1;
        if (!a->topic) {
                fprintf(stderr, "dedupctl replay: --topic TOPIC is required\n");
                return -1;
        }
        if (!a->reproduce && targets != 1) {
                fprintf(stderr, "dedupctl replay: give exactly one of --to-beginning, --to-offset N, "
                                "--to-time TIME (or --reproduce)\n");
                return -1;
        }
        if (!a->reproduce && (a->from_offset || a->from_time)) {
                fprintf(stderr, "dedupctl replay: --from-offset and --from-time go with --reproduce\n");
                return -1;
        }
        if (a->reproduce && (a->to_beginning || (a->from_offset && a->from_time) || (a->to_offset && a->to_time))) {
                fprintf(stderr, "dedupctl replay --reproduce: a range is --from-offset N or --from-time "
                                "TIME, and --to-offset M or --to-time TIME\n");
                return -1;
        }
        if ((a->to_offset && parse_offset("--to-offset", a->to_offset, &o->to_offset)) ||
            (a->from_offset && parse_offset("--from-offset", a->from_offset, &o->from_offset)) ||
            (a->to_time && parse_time("--to-time", a->to_time, &o->to_time_ms)) ||
            (a->from_time && parse_time("--from-time", a->from_time, &o->from_time_ms)))
                return -1;
        if (a->reproduce && o->from_offset >= 0 && o->to_offset >= 0 && o->to_offset < o->from_offset) {
                fprintf(stderr, "dedupctl replay: --to-offset %s is before --from-offset %s\n", a->to_offset,
                        a->from_offset);
                return -1;
        }
        if (a->partitions) {
                if (replay_parse_partitions(a->partitions, parts, &o->partition_cnt, err, sizeof(err))) {
                        fprintf(stderr, "dedupctl replay: --partitions: %s\n", err);
                        return -1;
                }
                o->partitions = *parts;
        }
        return 0;
}

int cmd_replay(struct config *cfg, const struct cmd_args *a)
{
        const struct replay_opts *o = &a->replay;
        const struct broker *b = broker_of(cfg);
        char err[1024];
        if (!b->replay) {
                fprintf(stderr, "dedupctl replay: %s\n", b->no_replay);
                return REPLAY_USAGE;
        }
        enum replay_rc rc = b->replay(cfg, o, err, sizeof(err));
        if (rc != REPLAY_OK)
                fprintf(stderr, "dedupctl replay: %s\n", err);
        return (int)rc;
}

int cmd_verify(struct config *cfg, const struct cmd_args *a)
{
        struct verify_opts o = {.since_ms = -1, .expect_caught_up = a->expect_caught_up, .wait_s = -1};
        char err[1024];
        enum verify_rc rc;
        if (a->since && parse_time("--since", a->since, &o.since_ms))
                return 2;
        if (a->wait) {
                char *end;
                long w = strtol(a->wait, &end, 10);
                if (*end || end == a->wait || w < 0 || w > 86400) {
                        fprintf(stderr, "dedupctl verify: --wait '%s': expected seconds, 0 to 86400\n", a->wait);
                        return 2;
                }
                o.wait_s = (int)w;
                o.expect_caught_up = 1;
        }
        rc = verify_run(cfg, &o, err, sizeof(err));
        if (rc == VERIFY_ERROR)
                fprintf(stderr, "dedupctl verify: %s\n", err);
        return (int)rc;
}

int cmd_purge(struct config *cfg, const struct cmd_args *a)
{
        int batch = a->batch_rows, dry_run = a->dry_run;
        struct store *s = connect_db(cfg);
        struct purge_stats st;
        char err[1024], keep[64];
        int rc;
        if (!s)
                return 2;
        rc = dry_run ? retention_purge_count(s, cfg, &st, err, sizeof(err))
                     : retention_purge(s, cfg, batch, &st, err, sizeof(err));
        store_free(s);
        if (rc) {
                fprintf(stderr, "dedupctl purge: %s\n", err);
                return 1;
        }
        config_format_duration(st.progress_keep_ms, keep, sizeof(keep));
        printf("namespace %s%s, by the database's clock:\n", cfg->namespace,
               dry_run ? " (dry run: nothing changed)" : "");
        printf("%-26s %" PRId64 " (response_expires_at passed; key and fingerprint kept)\n",
               dry_run ? "responses to drop:" : "responses dropped:", st.responses);
        printf("%-26s %" PRId64 " (DONE/FAILED/EXPIRED, expires_at passed)\n",
               dry_run ? "keys to delete:" : "keys deleted:", st.keys);
        printf("%-26s %" PRId64 " (older than %s)\n",
               dry_run ? "progress_log to delete:" : "progress_log deleted:", st.progress_rows, keep);
        printf("%-26s %" PRId64 " (fingerprint mismatches older than %s)\n",
               dry_run ? "mismatches to delete:" : "mismatches deleted:", st.mismatch_rows, keep);
        printf("%-26s %" PRId64 " (sampled duplicates older than %s)\n",
               dry_run ? "duplicates to delete:" : "duplicates deleted:", st.duplicate_rows, keep);
        if (st.outbox_keep_ms > 0) {
                config_format_duration(st.outbox_keep_ms, keep, sizeof(keep));
                printf("%-26s %" PRId64 " (sent more than %s ago)\n",
                       dry_run ? "outbox rows to delete:" : "outbox rows deleted:", st.outbox_rows, keep);
        } else {
                printf("%-26s kept (outbox.keep is 0)\n", "sent outbox rows:");
        }
        printf("%-26s %" PRId64 " (past expires_at, never purged)\n", "PENDING keys left alone:", st.pending_kept);
        if (cfg->keys_layout == LAYOUT_PARTITIONED) {
                config_format_duration(buckets_keep_ms(cfg), keep, sizeof(keep));
                if (dry_run)
                        printf("%-26s %" PRId64 " (buckets ended more than keep + keys.skew, %s, ago)\n",
                               "partitions to drop:", st.partitions, keep);
                else
                        printf("%-26s %" PRId64 " of %" PRId64 " key(s) (buckets ended more than %s ago)\n",
                               "partitions dropped:", st.partitions, st.partition_keys, keep);
        }
        return 0;
}

int cmd_plan(struct config *cfg, const struct cmd_args *a)
{
        double rate = a->rate_per_s;
        char err[1024];
        int rc = 0;
        /* Without the database the row size is estimated; the plan says so. */
        struct store *s = store_open(cfg->pg_conninfo, err, sizeof(err));
        if (!s)
                fprintf(stderr, "dedupctl plan: %s; the row size is estimated\n", err);
        if (plan_print(cfg, s, rate, stdout, err, sizeof(err))) {
                fprintf(stderr, "dedupctl plan: %s\n", err);
                rc = 1;
        }
        store_free(s);
        return rc;
}

int cmd_purge_args(struct cmd_args *a)
{
        int *batch = &a->batch_rows;
        char *end;
        long v;
        if (!a->batch)
                return 0;
        v = strtol(a->batch, &end, 10);
        if (!*a->batch || *end || v < 1 || v > 100000) {
                fprintf(stderr, "dedupctl purge: --batch '%s': expected a number of rows from 1 to 100000\n", a->batch);
                return -1;
        }
        *batch = (int)v;
        return 0;
}

int cmd_plan_args(struct cmd_args *a)
{
        double *rate = &a->rate_per_s;
        char err[256];
        if (!a->rate) {
                fprintf(stderr, "dedupctl plan: --rate is required: the rate of new keys, e.g. --rate 10000/s (or "
                                "/min, /h; a plain number is per second)\n");
                return -1;
        }
        if (plan_parse_rate(a->rate, rate, err, sizeof(err))) {
                fprintf(stderr, "dedupctl plan: %s\n", err);
                return -1;
        }
        return 0;
}

int cmd_outbox_args(struct cmd_args *a)
{
        char err[256];
        if (outbox_parse(a->nwords, a->words, a->all, a->unsent, a->limit, &a->outbox, err, sizeof(err))) {
                fprintf(stderr, "dedupctl outbox: %s\n", err);
                return -1;
        }
        return 0;
}

int cmd_check(struct config *cfg, const struct cmd_args *a)
{
        struct check_opts co = {.print = a->print,
                                .offline = a->offline,
                                .broker_timeout_ms = BROKER_CHECK_TIMEOUT_MS,
                                .out = stdout,
                                .err = stderr};
        return (int)check_run(cfg, &co);
}

int cmd_outbox(struct config *cfg, const struct cmd_args *a) { return outbox_run(cfg, &a->outbox); }

int cmd_rerun_args(struct cmd_args *a)
{
        char err[256];
        if (rerun_parse(a->words[0], a->reason, a->by, a->emit_only, &a->rerun, err, sizeof(err))) {
                fprintf(stderr, "dedupctl rerun: %s\n", err);
                return -1;
        }
        return 0;
}

int cmd_rerun(struct config *cfg, const struct cmd_args *a) { return rerun_run(cfg, &a->rerun); }

int cmd_dupes_args(struct cmd_args *a)
{
        char err[256];
        if (dupes_parse(a->since, a->limit, a->topic, &a->dupes, err, sizeof(err))) {
                fprintf(stderr, "dedupctl dupes: %s\n", err);
                return -1;
        }
        return 0;
}

int cmd_dupes(struct config *cfg, const struct cmd_args *a) { return dupes_run(cfg, &a->dupes); }

int cmd_grant_args(struct cmd_args *a)
{
        if (a->role && *a->role)
                return 0;
        fprintf(stderr, "dedupctl grant: --role NAME is required: the role dedupd runs as\n");
        return -1;
}

void cmd_args_free(struct cmd_args *a)
{
        free(a->parts);
        outbox_opts_free(&a->outbox);
}
