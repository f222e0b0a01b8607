/* dedupctl: the operator's tool — one table of commands (name, synopsis, what it does, its options,
 * whether it needs a config, its function), from which the usage, `help COMMAND` and the dispatch come. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/envfile.h"
#include "base/log.h"
#include "ops/version.h"
#include "pg/layout.h"
#include "tools/commands.h"

/* One command. */
struct command {
        const char *name;
        const char *synopsis; /* after the name; one line per form ("\n" between them; a line
                               * beginning with a space goes on the form above) */
        const char *summary;  /* what it does, in one line (the usage) */
        const char *help;     /* what it does, in full (help COMMAND) */
        const char *options;  /* the long options it takes besides -c and -h, space-separated */
        int config;           /* it needs -c FILE */
        int words;            /* what may follow the options: 0 nothing, 1 exactly one, -1 its args step checks */
        int (*args)(struct cmd_args *a);                          /* before the config is read; NULL: none */
        int (*run)(struct config *cfg, const struct cmd_args *a); /* NULL: the tool's own (help) */
};

static int help_config(struct config *cfg, const struct cmd_args *a);

static const struct command commands[] = {
        {"check", "-c FILE [--env-file FILE] [--print] [--offline]",
         "validate a config, its handlers and key design; ask the broker and the database",
         "Validate a config: every problem as file:line:column: message, and each handler's ABI; exit 1 when\n"
         "anything is wrong. Then ask the broker about the topics (or stream, or queues) and connect to the\n"
         "database: exit 2, naming it, when either cannot be reached (--offline: neither is asked).\n"
         "Key-design lint and the broker's retention against each retention class: warnings as\n"
         "file:line:column: warning: ...\n"
         "--env-file FILE: first set the variables of FILE, a systemd EnvironmentFile= (the unit's\n"
         "/etc/dedupd/environment), read as systemd reads it, so ${VAR} in the config expands as under the unit.",
         "env-file print offline", 1, 0, NULL, cmd_check},
        {"migrate", "-c FILE", "apply the schema migrations and the handlers' setup (as the schema's owner)",
         "Apply the schema migrations and run each handler's setup (its tables), as dedupd does at start when\n"
         "the schema is behind and its role may (run it as the schema's owner).",
         "", 1, 0, NULL, cmd_migrate},
        {"grant", "-c FILE --role NAME [--table T]... [--apply]",
         "the GRANTs that let a role owning nothing run dedupd (printed, or --apply)",
         "The GRANTs that let role NAME, which owns nothing, run dedupd on the schema FILE's conninfo migrated:\n"
         "USAGE on schema dedupd, SELECT, INSERT, UPDATE, DELETE on its tables (SELECT only on\n"
         "schema_migrations), its sequences, and each handler table T; printed, or with --apply run in one\n"
         "transaction (as the owner).",
         "role table apply", 1, 0, cmd_grant_args, cmd_grant},
        {"inspect", "-c FILE KEY", "show a key's record (status, first response, origin, times)",
         "Show a key's record: status, first response, origin, times.", "", 1, 1, NULL, cmd_inspect},
        {"rerun", "-c FILE KEY --reason TEXT [--emit-only] [--by NAME]",
         "an audited re-run of one key: run its effect once more, or emit its outbox again",
         "Re-run one key, recorded in dedupd.reruns with who asked (--by, else $SUDO_USER or $USER, and the\n"
         "database role), why, and the outcome the key had. Without --emit-only the key's row goes: the key's\n"
         "next delivery (a redelivery, or dedupctl replay, whose command it prints) runs the handler once more,\n"
         "as a new generation; a handler whose own tables refuse a second effect refuses it. With --emit-only\n"
         "the key stays and its outbox rows are published again by the relay, with the identity they went out\n"
         "with. Refused (exit 1): a key not found, a PENDING key (running, or in doubt), --emit-only without\n"
         "outbox rows. dedupctl inspect shows a key's re-runs, stats counts them, verify allows one more effect\n"
         "per re-run.",
         "reason emit-only by", 1, 1, cmd_rerun_args, cmd_rerun},
        {"dupes", "-c FILE [--since TIME|DURATION] [--topic TOPIC] [--limit N]",
         "where the absorbed duplicates come from: origin, producer, partition, delay",
         "Where the absorbed duplicates of the namespace come from, from the sample dedupd records of them\n"
         "(provenance.every, dedupd.duplicates): how many by origin — redelivery (that very message again: a\n"
         "crash, a rebalance, a replay), same-partition (another message of its partition: the producer sent\n"
         "it twice), other-partition, other-topic — with the delay since the key's first delivery; by source\n"
         "(the provenance.header's value, who produced it); by the partition they arrived on. --since TIME\n"
         "(ISO-8601 or epoch ms) or DURATION ago (default 24h); --topic: one topic; --limit: rows per table\n"
         "(default 10). Exit 1 when nothing was sampled since then, saying each topic's sampling.",
         "since topic limit", 1, 0, cmd_dupes_args, cmd_dupes},
        {"stats", "-c FILE", "keys by status and per-partition progress of the namespace",
         "Keys by status and per-partition progress of the namespace.", "", 1, 0, NULL, cmd_stats},
        {"purge", "-c FILE [--batch N] [--dry-run]", "purge expired responses, keys, progress and sent outbox rows now",
         "Purge the namespace now, as dedupd does every purge.interval_ms: responses past response_ttl, then\n"
         "DONE/FAILED/EXPIRED keys past expires_at (never PENDING), then old progress_log rows, then outbox\n"
         "rows sent longer than outbox.keep ago, in batches of N (default purge.batch); --dry-run only counts.\n"
         "Under keys.layout: partitioned the keys go with their partitions instead: each one whose bucket\n"
         "ended more than keep + keys.skew ago is dropped whole, one statement each.",
         "batch dry-run", 1, 0, cmd_purge_args, cmd_purge},
        {"outbox", "list -c FILE [--unsent] [--limit N]\nretry -c FILE (ID... | --all)\ndrop -c FILE (ID... | --all)",
         "the outbox rows the relay gave up: list them, retry them or drop them",
         "list: outbox rows the relay gave up (with --unsent, also those still waiting): id, state, topic,\n"
         "key, failures, reason, created; at most N (default 100).\n"
         "retry: put given-up rows back: the relay tries them again from a failure count of 0; exit 1 if an\n"
         "ID is not a given-up row.\n"
         "drop: delete given-up rows (never an unsent or a sent one).",
         "all unsent limit", 1, -1, cmd_outbox_args, cmd_outbox},
        {"plan", "-c FILE --rate N/s|N/min|N/h",
         "rows and bytes dedupd.keys holds per retention class at a rate of new keys",
         "Rows and bytes dedupd.keys holds per retention class at that rate of new keys (row size measured,\n"
         "or 100 B estimated).",
         "rate", 1, 0, cmd_plan_args, cmd_plan},
        {"replay",
         "-c FILE -t TOPIC (--to-beginning | --to-offset N | --to-time TIME) [--partitions 0,2] [--dry-run]\n"
         "-c FILE -t TOPIC --reproduce [--from-offset N | --from-time TIME] [--to-offset M | --to-time TIME]\n"
         " [--partitions 0,2] [--dry-run]",
         "deliver records again: move the group and dedupd.offsets back, or re-produce",
         "Move the group (Kafka's group.id) and dedupd.offsets of the namespace to that position, so dedupd\n"
         "delivers those records again; refused (exit 1) while the group has active members. On NATS the\n"
         "subject's consumer instead, N a stream sequence, refused while a pull request waits on it; on\n"
         "RabbitMQ refused (a queue forgets what it acknowledged).\n"
         "--reproduce (Kafka): produce the records [N, M) of each partition again, unchanged (key, value,\n"
         "headers, partition), as a misbehaving producer would; default: everything in the topic now.",
         "topic partitions to-beginning to-offset to-time from-offset from-time reproduce dry-run", 1, 0,
         cmd_replay_args, cmd_replay},
        {"verify", "-c FILE [--since TIME] [--expect-caught-up] [--wait SECONDS]",
         "audit the namespace: every anomaly with its key and origin, and the lag",
         "Audit the namespace: keys by status, keys with two effects, DONE keys without and FAILED keys with\n"
         "an effect, keys in doubt, counters (and since TIME), lag per partition; exit 1 listing every\n"
         "anomaly with its key and origin.\n"
         "--wait SECONDS: first wait, up to SECONDS, until dedupd has consumed and committed every record of\n"
         "the configured topics (lag 0, the schema there), then audit with --expect-caught-up; when the wait\n"
         "runs out, what is still behind is printed on stderr and the audit exits 1 with the lag.",
         "since expect-caught-up wait", 1, 0, NULL, cmd_verify},
        {"help-config", "[--markdown | --man]", "every configuration key with its type, default and meaning",
         "Every configuration key with its type, default and meaning; --markdown: the reference\n"
         "docs/configuration.md is (the settings that matter first, with the values each takes and whether\n"
         "SIGHUP reloads it); --man: the same as the body of dedupd.yaml(5).",
         "markdown man", 0, 0, NULL, help_config},
        {"help", "[COMMAND]", "this text, or one command's with its options", "This text, or one command's.", "", 0, -1,
         NULL, NULL},
};
#define COMMANDS (sizeof(commands) / sizeof(commands[0]))

enum {
        OPT_PARTITIONS = 256,
        OPT_TO_BEGINNING,
        OPT_TO_OFFSET,
        OPT_TO_TIME,
        OPT_FROM_OFFSET,
        OPT_FROM_TIME,
        OPT_REPRODUCE,
        OPT_DRY_RUN,
        OPT_SINCE,
        OPT_EXPECT_CAUGHT_UP,
        OPT_BATCH,
        OPT_RATE,
        OPT_PRINT,
        OPT_OFFLINE,
        OPT_ROLE,
        OPT_TABLE,
        OPT_APPLY,
        OPT_ALL,
        OPT_UNSENT,
        OPT_LIMIT,
        OPT_MARKDOWN,
        OPT_MAN,
        OPT_WAIT,
        OPT_ENV_FILE,
        OPT_REASON,
        OPT_EMIT_ONLY,
        OPT_BY,
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
        {"markdown", no_argument, NULL, OPT_MARKDOWN},
        {"man", no_argument, NULL, OPT_MAN},
        {"wait", required_argument, NULL, OPT_WAIT},
        {"env-file", required_argument, NULL, OPT_ENV_FILE},
        {"reason", required_argument, NULL, OPT_REASON},
        {"emit-only", no_argument, NULL, OPT_EMIT_ONLY},
        {"by", required_argument, NULL, OPT_BY},
        {NULL, 0, NULL, 0},
};

/* What `help COMMAND` says of each option. */
static const struct {
        const char *name, *arg, *desc;
} opt_help[] = {
        {"config", "FILE", "the configuration (YAML)"},
        {"topic", "TOPIC", "the topic (subject) to replay, or dupes' one topic; -t"},
        {"partitions", "0,2", "only these partitions"},
        {"to-beginning", NULL, "to the first record still there"},
        {"to-offset", "N", "to offset N (NATS: stream sequence N); with --reproduce the end of the range"},
        {"to-time", "TIME", "to the first record at or after TIME; with --reproduce the end of the range"},
        {"from-offset", "N", "--reproduce: the start of the range"},
        {"from-time", "TIME", "--reproduce: the start of the range, by time"},
        {"reproduce", NULL, "produce the range again instead of moving the group"},
        {"dry-run", NULL, "say what would be done, change nothing"},
        {"since", "TIME", "verify: also count what happened since TIME; dupes: from TIME, or DURATION ago"},
        {"expect-caught-up", NULL, "a partition not caught up is an anomaly (exit 1)"},
        {"wait", "SECONDS", "wait up to SECONDS for lag 0 first (implies --expect-caught-up)"},
        {"batch", "N", "rows deleted per transaction (1 to 100000)"},
        {"rate", "N/s", "new keys per second (or /min, /h)"},
        {"env-file", "FILE", "set FILE's variables first (systemd EnvironmentFile= syntax)"},
        {"print", NULL, "every setting as in effect (defaults, ${VARS}), secrets as (set, not shown)"},
        {"offline", NULL, "ask neither the broker nor the database"},
        {"role", "NAME", "the role dedupd runs as"},
        {"table", "T", "a handler's table the role needs (repeatable)"},
        {"apply", NULL, "run the statements (as the owner), in one transaction"},
        {"all", NULL, "every given-up row"},
        {"unsent", NULL, "list: the rows still waiting too"},
        {"limit", "N", "at most N rows (outbox list: default 100; dupes: per table, default 10)"},
        {"markdown", NULL, "as Markdown (docs/configuration.md)"},
        {"man", NULL, "as the body of the man page dedupd.yaml(5), for pandoc"},
        {"reason", "TEXT", "why (required; kept with the re-run)"},
        {"emit-only", NULL, "publish the key's outbox rows again; its effect does not run"},
        {"by", "NAME", "who asks (default: $SUDO_USER, else $USER)"},
};

static const struct command *command_named(const char *name)
{
        for (size_t i = 0; i < COMMANDS; i++)
                if (!strcmp(commands[i].name, name))
                        return &commands[i];
        return NULL;
}

/* Each line of text, indented. */
static void print_indented(FILE *fp, const char *text, const char *indent)
{
        for (const char *p = text; *p;) {
                const char *nl = strchr(p, '\n');
                int len = nl ? (int)(nl - p) : (int)strlen(p);
                fprintf(fp, "%s%.*s\n", indent, len, p);
                p += len + (nl != NULL);
        }
}

/* "  NAME SYNOPSIS" for each of its forms (a line going on the form above: under it). */
static void print_synopsis(FILE *fp, const struct command *c, const char *lead)
{
        const char *p = c->synopsis;
        do {
                const char *nl = strchr(p, '\n');
                int len = nl ? (int)(nl - p) : (int)strlen(p);
                if (*p == ' ')
                        fprintf(fp, "%*s%.*s\n", (int)strlen(lead) + 7, "", len, p);
                else
                        fprintf(fp, "%s%-7s%s%.*s\n", lead, c->name, len ? " " : "", len, p);
                p += len + (nl != NULL);
        } while (*p);
}

static void usage(FILE *fp)
{
        fprintf(fp, "Usage: dedupctl COMMAND -c FILE [args]\n\nCommands:\n");
        for (size_t i = 0; i < COMMANDS; i++) {
                print_synopsis(fp, &commands[i], "  ");
                fprintf(fp, "                         %s\n", commands[i].summary);
        }
        fprintf(fp, "  -V, --version          versions: dedupctl, handler ABI, the brokers' libraries, libpq\n"
                    "\n"
                    "dedupctl help COMMAND: one command, with its options. TIME: ISO-8601 with a zone\n"
                    "(2026-11-29T20:00:00Z, 2026-11-29T21:00:00+01:00) or epoch milliseconds.\n"
                    "\n"
                    "Exit codes: 0 ok, 1 problem found (key not found, anomalies, replay refused or failed),\n"
                    "2 bad usage or input, or unreachable database or broker.\n");
}

/* A long option's line in `help COMMAND`. */
static void print_option(FILE *fp, const char *name)
{
        for (size_t i = 0; i < sizeof(opt_help) / sizeof(opt_help[0]); i++) {
                if (strcmp(opt_help[i].name, name))
                        continue;
                char flag[64];
                snprintf(flag, sizeof(flag), "--%s%s%s", name, opt_help[i].arg ? " " : "",
                         opt_help[i].arg ? opt_help[i].arg : "");
                fprintf(fp, "  %-24s %s\n", flag, opt_help[i].desc);
        }
}

/* dedupctl help COMMAND (and COMMAND --help). */
static void command_help(FILE *fp, const struct command *c)
{
        print_synopsis(fp, c, "Usage: dedupctl ");
        fprintf(fp, "\n");
        print_indented(fp, c->help, "");
        fprintf(fp, "\nOptions:\n");
        if (c->config)
                print_option(fp, "config");
        char names[256];
        snprintf(names, sizeof(names), "%s", c->options);
        for (char *save = NULL, *tok = strtok_r(names, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
                print_option(fp, tok);
        fprintf(fp, "  %-24s %s\n", "-h, --help", "this text");
}

static int help_config(struct config *cfg, const struct cmd_args *a)
{
        (void)cfg;
        if (a->markdown == 2)
                config_print_man(stdout);
        else if (a->markdown)
                config_print_markdown(stdout);
        else
                config_print_reference(stdout);
        return 0;
}

/* dedupctl help [COMMAND]. */
static int help(int argc, char **argv)
{
        const struct command *c = argc > 2 ? command_named(argv[2]) : NULL;
        if (argc > 3 || (argc == 3 && !c)) {
                fprintf(stderr, "dedupctl help: %s\n", argc > 3 ? "one command at most" : "no such command");
                usage(stderr);
                return 2;
        }
        if (c)
                command_help(stdout, c);
        else
                usage(stdout);
        return 0;
}

static const char *option_name(int opt)
{
        for (size_t i = 0; opts[i].name; i++)
                if (opts[i].val == opt)
                        return opts[i].name;
        return "?";
}

/* Whether command c takes option opt (-c and -h: all that take a config; -h: all). */
static int takes(const struct command *c, int opt)
{
        if (opt == 'h' || (opt == 'c' && c->config))
                return 1;
        const char *name = option_name(opt), *p = c->options;
        size_t n = strlen(name);
        for (; (p = strstr(p, name)); p += n)
                if ((p == c->options || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
                        return 1;
        return 0;
}

/* One option into a; -1 to go on, else the exit code. */
static int take_option(const struct command *c, int opt, struct cmd_args *a)
{
        switch (opt) {
        case 'c': a->path = optarg; break;
        case 'h': command_help(stdout, c); return 0;
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
        case OPT_MARKDOWN: a->markdown = 1; break;
        case OPT_MAN: a->markdown = 2; break;
        case OPT_WAIT: a->wait = optarg; break;
        case OPT_ENV_FILE: a->env_file = optarg; break;
        case OPT_REASON: a->reason = optarg; break;
        case OPT_EMIT_ONLY: a->emit_only = 1; break;
        case OPT_BY: a->by = optarg; break;
        default: command_help(stderr, c); return 2;
        }
        return -1;
}

/* What follows the options, as the command takes it. */
static int words_fit(const struct command *c, const struct cmd_args *a)
{
        if (c->words < 0 || a->nwords == c->words)
                return 1;
        fprintf(stderr, "dedupctl %s: %s\n", c->name, c->words ? "expects exactly one KEY" : "unexpected argument");
        return 0;
}

/* The options of command c; -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, const struct command *c, struct cmd_args *a)
{
        const char *misplaced = NULL;
        int opt, rc;
        optind = 2;
        while ((opt = getopt_long(argc, argv, "c:ht:", opts, NULL)) != -1) {
                if ((rc = take_option(c, opt, a)) >= 0)
                        return rc;
                if (!takes(c, opt))
                        misplaced = option_name(opt);
        }
        a->nwords = argc - optind;
        a->words = argv + optind;
        if (misplaced) {
                fprintf(stderr, "dedupctl %s: option --%s does not apply to this command\n", c->name, misplaced);
                return 2;
        }
        if (c->config && !a->path) {
                fprintf(stderr, "dedupctl %s: -c FILE is required\n", c->name);
                return 2;
        }
        return words_fit(c, a) ? -1 : 2;
}

static struct config *load(const char *path)
{
        struct config_errors errs = {0};
        struct config *cfg = config_load(path, &errs);
        for (size_t i = 0; i < errs.cnt; i++)
                fprintf(stderr, "%s\n", errs.msgs[i]);
        config_errors_clear(&errs);
        if (cfg)
                keys_layout_from_config(cfg);
        return cfg;
}

/* --env-file: its variables set, each line systemd would skip a warning; -1 when it cannot be read. */
static int load_env_file(const char *path)
{
        struct envfile e;
        char err[512];
        if (envfile_read(path, &e, err, sizeof(err))) {
                fprintf(stderr, "dedupctl: --env-file %s\n", err);
                return -1;
        }
        for (size_t i = 0; i < e.n; i++)
                if (!e.v[i].name)
                        fprintf(stderr, "%s:%d: warning: %s\n", path, e.v[i].line, e.v[i].value);
        envfile_apply(&e);
        envfile_free(&e);
        return 0;
}

/* Its arguments checked (bad usage exits 2 before the config is read), the config loaded, the command run. */
static int run_command(const struct command *c, struct cmd_args *a)
{
        struct config *cfg = NULL;
        int rc;
        if ((c->args && c->args(a)) || (a->env_file && load_env_file(a->env_file))) {
                cmd_args_free(a);
                return 2;
        }
        if (c->config && !(cfg = load(a->path))) {
                cmd_args_free(a);
                return c->run == cmd_check ? 1 : 2;
        }
        rc = c->run(cfg, a);
        config_free(cfg);
        cmd_args_free(a);
        return rc;
}

int main(int argc, char **argv)
{
        struct cmd_args a = {0};
        const struct command *c;
        int rc;

        log_set_level(LOG_WARN);
        if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
                usage(argc < 2 ? stderr : stdout);
                return argc < 2 ? 2 : 0;
        }
        if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
                version_print(stdout, "dedupctl");
                return 0;
        }
        if (!(c = command_named(argv[1]))) {
                fprintf(stderr, "dedupctl: unknown command '%s'\n", argv[1]);
                usage(stderr);
                return 2;
        }
        if (!c->run)
                return help(argc, argv);
        if ((rc = parse_options(argc, argv, c, &a)) >= 0)
                return rc;
        return run_command(c, &a);
}
