/* dedupctl: the operator's tool — check a config, migrate the schema, inspect keys, show progress,
 * replay, verify, purge expired keys, plan their storage, look after the outbox. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/keyspec.h"
#include "core/loader.h"
#include "base/log.h"
#include "ops/version.h"
#include "tools/replay.h"
#include "core/retention.h"
#include "tools/check.h"
#include "tools/outbox.h"
#include "tools/plan.h"
#include "tools/rows.h"
#include "source/brokers.h"
#include "pg/audit.h"
#include "pg/store.h"
#include "pg/grants.h"
#include "pg/schema.h"
#include "tools/verify.h"

static void usage(FILE *fp)
{
        fprintf(fp,
                "Usage: dedupctl COMMAND -c FILE [args]\n"
                "\n"
                "Commands:\n"
                "  check   -c FILE [--print] [--offline]\n"
                "                         validate a config: every problem as file:line:column: message,\n"
                "                         and each handler's ABI; exit 1 when anything is wrong. Then ask\n"
                "                         the broker about the topics and connect to the database: exit 2,\n"
                "                         naming it, when either cannot be reached (--offline: neither).\n"
                "                         --print: every setting as in effect (defaults, ${VARS}),\n"
                "                         secrets shown as (set, not shown).\n"
                "                         Key-design lint and the topics' retention.ms against each\n"
                "                         retention class: warnings as file:line:column: warning: ...\n"
                "  migrate -c FILE        apply the schema migrations and run each handler's setup (its\n"
                "                         tables), as dedupd does at start when the schema is behind\n"
                "                         and its role may (run it as the schema's owner)\n"
                "  grant   -c FILE --role NAME [--table T]... [--apply]\n"
                "                         the GRANTs that let role NAME, which owns nothing, run dedupd\n"
                "                         on the schema FILE's conninfo migrated: USAGE on schema dedupd,\n"
                "                         SELECT, INSERT, UPDATE, DELETE on its tables (SELECT only on\n"
                "                         schema_migrations), its sequences, and each handler table T;\n"
                "                         printed, or with --apply run in one transaction (as the owner)\n"
                "  inspect -c FILE KEY    show a key's record (status, first response, origin, times)\n"
                "  stats   -c FILE        keys by status and per-partition progress of the namespace\n"
                "  purge   -c FILE [--batch N] [--dry-run]\n"
                "                         purge the namespace now, as dedupd does every purge.interval_ms:\n"
                "                         responses past response_ttl, then DONE/FAILED/EXPIRED keys past\n"
                "                         expires_at (never PENDING), then old progress_log rows, then\n"
                "                         outbox rows sent longer than outbox.keep ago, in batches of N\n"
                "                         (default purge.batch); --dry-run only counts\n"
                "  outbox  list -c FILE [--unsent] [--limit N]\n"
                "                         outbox rows the relay gave up (with --unsent, also those still\n"
                "                         waiting): id, state, topic, key, failures, reason, created;\n"
                "                         at most N (default 100)\n"
                "  outbox  retry -c FILE (ID... | --all)\n"
                "                         put given-up rows back: the relay tries them again from a\n"
                "                         failure count of 0; exit 1 if an ID is not a given-up row\n"
                "  outbox  drop -c FILE (ID... | --all)\n"
                "                         delete given-up rows (never an unsent or a sent one)\n"
                "  plan    -c FILE --rate N/s|N/min|N/h\n"
                "                         rows and bytes dedupd.keys holds per retention class at that\n"
                "                         rate of new keys (row size measured, or 100 B estimated)\n"
                "  replay  -c FILE -t TOPIC (--to-beginning | --to-offset N | --to-time TIME)\n"
                "          [--partitions 0,2] [--dry-run]\n"
                "                         move the group (kafka group.id) and dedupd.offsets of the\n"
                "                         namespace to that position, so dedupd delivers those records\n"
                "                         again; refused (exit 1) while the group has active members.\n"
                "                         source: nats: the subject's consumer instead, N a stream\n"
                "                         sequence; refused while a pull request waits on it\n"
                "  replay  -c FILE -t TOPIC --reproduce [--from-offset N | --from-time TIME]\n"
                "          [--to-offset M | --to-time TIME] [--partitions 0,2] [--dry-run]\n"
                "                         produce the records [N, M) of each partition again, unchanged\n"
                "                         (key, value, headers, partition), as a misbehaving producer\n"
                "                         would; default: everything in the topic now\n"
                "  verify  -c FILE [--since TIME] [--expect-caught-up]\n"
                "                         audit the namespace: keys by status, keys with two effects,\n"
                "                         DONE keys without and FAILED keys with an effect, keys in\n"
                "                         doubt, counters (and since TIME), lag per partition; exit 1\n"
                "                         listing every anomaly with its key and origin\n"
                "  help-config            every configuration key with its default\n"
                "  -V, --version          versions: dedupctl, handler ABI, the brokers' libraries, libpq\n"
                "\n"
                "TIME: ISO-8601 with a zone (2026-11-29T20:00:00Z, 2026-11-29T21:00:00+01:00) or epoch\n"
                "milliseconds.\n"
                "\n"
                "Exit codes: 0 ok, 1 problem found (key not found, anomalies, replay refused or failed),\n"
                "2 bad usage or input, or unreachable database or broker.\n");
}

static struct config *load(const char *path)
{
        struct config_errors errs = {0};
        struct config *cfg = config_load(path, &errs);
        for (size_t i = 0; i < errs.cnt; i++)
                fprintf(stderr, "%s\n", errs.msgs[i]);
        config_errors_clear(&errs);
        return cfg;
}

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
                    loader_init(&h, t->handler_config, s, err, sizeof(err))) {
                        fprintf(stderr, "dedupctl: topic %s: %s\n", t->name, err);
                        rc = 1;
                } else {
                        printf("topic %s: handler %s set up\n", t->name, h.desc->name ? h.desc->name : t->handler_path);
                }
                loader_close(&h);
        }
        return rc;
}

static int cmd_migrate(struct config *cfg)
{
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
                fprintf(stderr, "dedupctl: schema dedupd differs from its description in %d place%s: %s\n",
                        differences, differences == 1 ? "" : "s", report);
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
static int cmd_grant(struct config *cfg, const char *role, const char *const *tables, size_t ntables, int apply)
{
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

static int cmd_inspect(struct config *cfg, const char *key)
{
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
        if (q) {
                fprintf(stderr, "dedupctl: %s\n", err);
                rc = 2;
        } else if (PQntuples(r) == 0) {
                fprintf(stderr, "dedupctl: key '%s' not found in namespace %s\n", key, cfg->namespace);
                rc = 1;
        } else {
                for (int c = 0; c < PQnfields(r); c++)
                        printf("%-19s %s\n", PQfname(r, c),
                               PQgetisnull(r, 0, c) ? "(null)" : PQgetvalue(r, 0, c));
                rc = 0;
        }
        PQclear(r);
        store_free(s);
        return rc;
}

static int cmd_stats(struct config *cfg)
{
        struct store *s = connect_db(cfg);
        PGresult *r = NULL;
        char err[1024];
        int rc = 0;
        if (!s)
                return 2;
        if (store_audit_statuses(s, cfg->namespace, &r, err, sizeof(err)) == STORE_OK) {
                printf("keys in namespace %s:\n", cfg->namespace);
                rows_print(r);
                PQclear(r);
        } else {
                fprintf(stderr, "dedupctl: %s\n", err);
                rc = 2;
        }
        if (store_audit_partitions(s, cfg->namespace, &r, err, sizeof(err)) == STORE_OK) {
                printf("progress per partition:\n");
                rows_print(r);
                PQclear(r);
        } else if (!rc) {
                fprintf(stderr, "dedupctl: %s\n", err);
                rc = 2;
        }
        store_free(s);
        return rc;
}

/* Options of replay and verify, as given. */
struct args {
        const char *path;
        const char *topic, *partitions, *to_offset, *to_time, *from_offset, *from_time, *since;
        const char *batch, *rate; /* purge --batch, plan --rate */
        int to_beginning, reproduce, dry_run, expect_caught_up, print, offline;
        const char *role;           /* grant --role */
        const char *tables[64];     /* grant --table, repeated */
        size_t table_cnt;
        int apply;                  /* grant --apply */
        int all, unsent;            /* outbox --all, --unsent */
        const char *limit;          /* outbox list --limit */
};

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
        if (replay_parse_time(s, out, err, sizeof(err))) {
                fprintf(stderr, "dedupctl: %s: %s\n", opt, err);
                return -1;
        }
        return 0;
}

/* Option combinations are checked before the config is read: exit 2. */
static int replay_opts_from(const struct args *a, struct replay_opts *o, int32_t **parts)
{
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
        if (a->reproduce && (a->to_beginning || (a->from_offset && a->from_time) ||
                             (a->to_offset && a->to_time))) {
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

static int cmd_replay(struct config *cfg, const struct replay_opts *o)
{
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

static int cmd_verify(struct config *cfg, const struct args *a)
{
        struct verify_opts o = {.since_ms = -1, .expect_caught_up = a->expect_caught_up};
        char err[1024];
        enum verify_rc rc;
        if (a->since && parse_time("--since", a->since, &o.since_ms))
                return 2;
        rc = verify_run(cfg, &o, err, sizeof(err));
        if (rc == VERIFY_ERROR)
                fprintf(stderr, "dedupctl verify: %s\n", err);
        return (int)rc;
}

static int cmd_purge(struct config *cfg, int batch, int dry_run)
{
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
        if (st.outbox_keep_ms > 0) {
                config_format_duration(st.outbox_keep_ms, keep, sizeof(keep));
                printf("%-26s %" PRId64 " (sent more than %s ago)\n",
                       dry_run ? "outbox rows to delete:" : "outbox rows deleted:", st.outbox_rows, keep);
        } else {
                printf("%-26s kept (outbox.keep is 0)\n", "sent outbox rows:");
        }
        printf("%-26s %" PRId64 " (past expires_at, never purged)\n", "PENDING keys left alone:",
               st.pending_kept);
        return 0;
}

static int cmd_plan(struct config *cfg, double rate)
{
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

/* The commands, and which options each takes. */
enum cmd_id {
        CMD_CHECK, CMD_MIGRATE, CMD_INSPECT, CMD_STATS, CMD_PURGE, CMD_PLAN, CMD_REPLAY, CMD_VERIFY, CMD_GRANT, CMD_OUTBOX
};
#define ONLY(c) (1u << (c))
static const char *const cmd_names[] = {"check", "migrate", "inspect", "stats", "purge",
                                        "plan",  "replay",  "verify",  "grant", "outbox"};
#define CMD_CNT (sizeof(cmd_names) / sizeof(cmd_names[0]))

enum {
        OPT_PARTITIONS = 256, OPT_TO_BEGINNING, OPT_TO_OFFSET, OPT_TO_TIME, OPT_FROM_OFFSET, OPT_FROM_TIME,
        OPT_REPRODUCE, OPT_DRY_RUN, OPT_SINCE, OPT_EXPECT_CAUGHT_UP, OPT_BATCH, OPT_RATE, OPT_PRINT,
        OPT_OFFLINE, OPT_ROLE, OPT_TABLE, OPT_APPLY, OPT_ALL, OPT_UNSENT, OPT_LIMIT,
};
static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {"topic", required_argument, NULL, 't'},
        {"partitions", required_argument, NULL, OPT_PARTITIONS},
        {"to-beginning", no_argument, NULL, OPT_TO_BEGINNING},
        {"to-offset", required_argument, NULL, OPT_TO_OFFSET},
        {"to-time", required_argument, NULL, OPT_TO_TIME},
        {"from-offset", required_argument, NULL, OPT_FROM_OFFSET},
        {"from-time", required_argument, NULL, OPT_FROM_TIME},
        {"reproduce", no_argument, NULL, OPT_REPRODUCE},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"since", required_argument, NULL, OPT_SINCE},
        {"expect-caught-up", no_argument, NULL, OPT_EXPECT_CAUGHT_UP},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"rate", required_argument, NULL, OPT_RATE},
        {"print", no_argument, NULL, OPT_PRINT},
        {"offline", no_argument, NULL, OPT_OFFLINE},
        {"role", required_argument, NULL, OPT_ROLE},
        {"table", required_argument, NULL, OPT_TABLE},
        {"apply", no_argument, NULL, OPT_APPLY},
        {"all", no_argument, NULL, OPT_ALL},
        {"unsent", no_argument, NULL, OPT_UNSENT},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {NULL, 0, NULL, 0},
};

/* The commands an option applies to (-c and -h apply to all). */
static unsigned option_scope(int opt)
{
        switch (opt) {
        case OPT_SINCE:
        case OPT_EXPECT_CAUGHT_UP: return ONLY(CMD_VERIFY);
        case OPT_BATCH: return ONLY(CMD_PURGE);
        case OPT_RATE: return ONLY(CMD_PLAN);
        case OPT_PRINT:
        case OPT_OFFLINE: return ONLY(CMD_CHECK);
        case OPT_DRY_RUN: return ONLY(CMD_REPLAY) | ONLY(CMD_PURGE);
        case OPT_ROLE:
        case OPT_TABLE:
        case OPT_APPLY: return ONLY(CMD_GRANT);
        case OPT_ALL:
        case OPT_UNSENT:
        case OPT_LIMIT: return ONLY(CMD_OUTBOX);
        case 'c':
        case 'h': return ~0u;
        default: return ONLY(CMD_REPLAY); /* -t and the positions */
        }
}

static const char *option_name(int opt)
{
        for (size_t i = 0; opts[i].name; i++)
                if (opts[i].val == opt)
                        return opts[i].name;
        return "?";
}

/* One option into a; 0 fine, or an exit code. */
static int take_option(int opt, struct args *a)
{
        switch (opt) {
        case 'c': a->path = optarg; break;
        case 'h': usage(stdout); return 0;
        case 't': a->topic = optarg; break;
        case OPT_PARTITIONS: a->partitions = optarg; break;
        case OPT_TO_BEGINNING: a->to_beginning = 1; break;
        case OPT_TO_OFFSET: a->to_offset = optarg; break;
        case OPT_TO_TIME: a->to_time = optarg; break;
        case OPT_FROM_OFFSET: a->from_offset = optarg; break;
        case OPT_FROM_TIME: a->from_time = optarg; break;
        case OPT_REPRODUCE: a->reproduce = 1; break;
        case OPT_DRY_RUN: a->dry_run = 1; break;
        case OPT_SINCE: a->since = optarg; break;
        case OPT_EXPECT_CAUGHT_UP: a->expect_caught_up = 1; break;
        case OPT_BATCH: a->batch = optarg; break;
        case OPT_RATE: a->rate = optarg; break;
        case OPT_PRINT: a->print = 1; break;
        case OPT_OFFLINE: a->offline = 1; break;
        case OPT_ROLE: a->role = optarg; break;
        case OPT_TABLE:
                if (a->table_cnt == sizeof(a->tables) / sizeof(a->tables[0])) {
                        fprintf(stderr, "dedupctl grant: at most %zu --table options\n", a->table_cnt);
                        return 2;
                }
                a->tables[a->table_cnt++] = optarg;
                break;
        case OPT_APPLY: a->apply = 1; break;
        case OPT_ALL: a->all = 1; break;
        case OPT_UNSENT: a->unsent = 1; break;
        case OPT_LIMIT: a->limit = optarg; break;
        default: usage(stderr); return 2;
        }
        return -1;
}

/* The options of command id; -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, enum cmd_id id, struct args *a)
{
        const char *misplaced = NULL;
        int opt, rc;
        optind = 2;
        while ((opt = getopt_long(argc, argv, "c:ht:", opts, NULL)) != -1) {
                if ((rc = take_option(opt, a)) >= 0)
                        return rc;
                if (!(option_scope(opt) & ONLY(id)))
                        misplaced = option_name(opt);
        }
        if (misplaced) {
                fprintf(stderr, "dedupctl %s: option --%s does not apply to this command\n", cmd_names[id], misplaced);
                return 2;
        }
        if (!a->path) {
                fprintf(stderr, "dedupctl %s: -c FILE is required\n", cmd_names[id]);
                return 2;
        }
        if (id == CMD_OUTBOX)
                return -1; /* its words are checked by outbox_parse */
        if (id == CMD_INSPECT ? optind != argc - 1 : optind != argc) {
                fprintf(stderr, "dedupctl %s: %s\n", cmd_names[id],
                        id == CMD_INSPECT ? "expects exactly one KEY" : "unexpected argument");
                return 2;
        }
        return -1;
}

static int purge_batch_of(const struct args *a, int *batch)
{
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

static int plan_rate_of(const struct args *a, double *rate)
{
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

static int outbox_opts_of(const struct args *a, int argc, char *const *argv, struct outbox_opts *o)
{
        char err[256];
        if (outbox_parse(argc, argv, a->all, a->unsent, a->limit, o, err, sizeof(err))) {
                fprintf(stderr, "dedupctl outbox: %s\n", err);
                return -1;
        }
        return 0;
}

/* The command's arguments are checked before the config is loaded: bad usage exits 2 at once.
 * words: what follows the options (inspect's KEY, outbox's ACTION [ID...]). */
static int run_command(enum cmd_id id, const struct args *a, int nwords, char *const *words)
{
        struct replay_opts ro;
        struct outbox_opts oo = {0};
        int32_t *parts = NULL;
        struct config *cfg;
        double rate = 0;
        int batch = 0, rc = 2;

        if (id == CMD_GRANT && (!a->role || !*a->role)) {
                fprintf(stderr, "dedupctl grant: --role NAME is required: the role dedupd runs as\n");
                return 2;
        }
        if ((id == CMD_PURGE && purge_batch_of(a, &batch)) || (id == CMD_PLAN && plan_rate_of(a, &rate)) ||
            (id == CMD_REPLAY && replay_opts_from(a, &ro, &parts)) ||
            (id == CMD_OUTBOX && outbox_opts_of(a, nwords, words, &oo))) {
                free(parts);
                outbox_opts_free(&oo);
                return 2;
        }
        if (!(cfg = load(a->path))) {
                free(parts);
                outbox_opts_free(&oo);
                return id == CMD_CHECK ? 1 : 2;
        }
        switch (id) {
        case CMD_CHECK: {
                struct check_opts co = {.print = a->print, .offline = a->offline,
                                        .broker_timeout_ms = BROKER_CHECK_TIMEOUT_MS, .out = stdout, .err = stderr};
                rc = (int)check_run(cfg, &co);
                break;
        }
        case CMD_MIGRATE: rc = cmd_migrate(cfg); break;
        case CMD_INSPECT: rc = cmd_inspect(cfg, words[0]); break;
        case CMD_STATS: rc = cmd_stats(cfg); break;
        case CMD_PURGE: rc = cmd_purge(cfg, batch, a->dry_run); break;
        case CMD_PLAN: rc = cmd_plan(cfg, rate); break;
        case CMD_REPLAY: rc = cmd_replay(cfg, &ro); break;
        case CMD_VERIFY: rc = cmd_verify(cfg, a); break;
        case CMD_GRANT: rc = cmd_grant(cfg, a->role, a->tables, a->table_cnt, a->apply); break;
        case CMD_OUTBOX: rc = outbox_run(cfg, &oo); break;
        }
        config_free(cfg);
        free(parts);
        outbox_opts_free(&oo);
        return rc;
}

int main(int argc, char **argv)
{
        struct args a = {0};
        size_t id;
        int rc;

        log_set_level(LOG_WARN);
        if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
                usage(argc < 2 ? stderr : stdout);
                return argc < 2 ? 2 : 0;
        }
        if (!strcmp(argv[1], "help-config")) {
                config_print_reference(stdout);
                return 0;
        }
        if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
                version_print(stdout, "dedupctl");
                return 0;
        }
        for (id = 0; id < CMD_CNT && strcmp(argv[1], cmd_names[id]); id++)
                ;
        if (id == CMD_CNT) {
                fprintf(stderr, "dedupctl: unknown command '%s'\n", argv[1]);
                usage(stderr);
                return 2;
        }
        if ((rc = parse_options(argc, argv, (enum cmd_id)id, &a)) >= 0)
                return rc;
        return run_command((enum cmd_id)id, &a, argc - optind, argv + optind);
}
