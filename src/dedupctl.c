/* dedupctl: the operator's tool — check a config, migrate the schema, inspect keys, show progress. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "loader.h"
#include "log.h"
#include "store.h"

static void usage(FILE *fp)
{
        fprintf(fp,
                "Usage: dedupctl COMMAND -c FILE [args]\n"
                "\n"
                "Commands:\n"
                "  check   -c FILE        validate a config: every problem as file:line:column: message,\n"
                "                         and each handler's ABI; exit 1 when anything is wrong\n"
                "  migrate -c FILE        apply the schema migrations (dedupd also does it at start)\n"
                "  inspect -c FILE KEY    show a key's record (status, first response, origin, times)\n"
                "  stats   -c FILE        keys by status and per-partition progress of the namespace\n"
                "  help-config            every configuration key with its default\n"
                "\n"
                "Exit codes: 0 ok, 1 problem found (or key not found), 2 bad usage or unreachable database.\n");
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

static int cmd_check(struct config *cfg)
{
        int bad = 0;
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                const struct topic_conf *t = &cfg->topics[i];
                struct handler h;
                char err[1024];
                if (loader_open(&h, t->handler_path, err, sizeof(err))) {
                        fprintf(stderr, "%s:%d:%d: %s\n", cfg->path, t->line, t->col, err);
                        bad = 1;
                        continue;
                }
                printf("topic %s: key %s%s%s%s%s, handler %s (ABI %u), dead letters to %s\n", t->name,
                       t->key_subject, t->key_action ? "/" : "", t->key_action ? t->key_action : "",
                       t->key_request ? "/" : "", t->key_request ? t->key_request : "",
                       h.desc->name ? h.desc->name : "?", h.desc->abi_major, t->dlq_topic);
                loader_close(&h);
        }
        if (bad)
                return 1;
        printf("%s: OK (namespace %s, %zu topic(s))\n", cfg->path, cfg->namespace, cfg->topic_cnt);
        return 0;
}

static int connect_db(struct config *cfg, struct store *s)
{
        char err[1024];
        if (store_connect(s, cfg->pg_conninfo, err, sizeof(err)) != STORE_OK) {
                fprintf(stderr, "dedupctl: cannot connect to the database: %s\n", err);
                return -1;
        }
        return 0;
}

static void print_result(PGresult *r)
{
        PQprintOpt po = {0};
        po.header = 1;
        po.align = 1;
        po.fieldSep = "|";
        PQprint(stdout, r, &po);
}

static int cmd_migrate(struct config *cfg)
{
        struct store s = {0};
        char err[1024];
        int applied, known;
        if (connect_db(cfg, &s))
                return 2;
        if (store_migrate(&s, err, sizeof(err))) {
                fprintf(stderr, "dedupctl: migration failed: %s\n", err);
                store_close(&s);
                return 1;
        }
        store_schema_version(&s, &applied, &known, err, sizeof(err));
        printf("schema dedupd at version %d (of %d known)\n", applied, known);
        store_close(&s);
        return 0;
}

static int cmd_inspect(struct config *cfg, const char *key)
{
        struct store s = {0};
        const char *params[2] = {cfg->namespace, key};
        int rc;
        if (connect_db(cfg, &s))
                return 2;
        PGresult *r = PQexecParams(s.conn,
                                   "SELECT namespace, idem_key, status, response, attempts, topic, partition,"
                                   " \"offset\", encode(fingerprint, 'hex') AS fingerprint, created_at,"
                                   " updated_at, expires_at FROM dedupd.keys"
                                   " WHERE namespace = $1 AND idem_key = $2",
                                   2, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
                fprintf(stderr, "dedupctl: %s", PQerrorMessage(s.conn));
                rc = 2;
        } else if (PQntuples(r) == 0) {
                fprintf(stderr, "dedupctl: key '%s' not found in namespace %s\n", key, cfg->namespace);
                rc = 1;
        } else {
                for (int c = 0; c < PQnfields(r); c++)
                        printf("%-12s %s\n", PQfname(r, c),
                               PQgetisnull(r, 0, c) ? "(null)" : PQgetvalue(r, 0, c));
                rc = 0;
        }
        PQclear(r);
        store_close(&s);
        return rc;
}

static int cmd_stats(struct config *cfg)
{
        struct store s = {0};
        const char *params[1] = {cfg->namespace};
        int rc = 0;
        if (connect_db(cfg, &s))
                return 2;
        PGresult *r = PQexecParams(s.conn,
                                   "SELECT status, count(*) AS keys FROM dedupd.keys WHERE namespace = $1"
                                   " GROUP BY status ORDER BY status",
                                   1, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(r) == PGRES_TUPLES_OK) {
                printf("keys in namespace %s:\n", cfg->namespace);
                print_result(r);
        } else {
                fprintf(stderr, "dedupctl: %s", PQerrorMessage(s.conn));
                rc = 2;
        }
        PQclear(r);
        r = PQexecParams(s.conn,
                         "SELECT topic, partition, next_offset, consumed, applied, rejected, duplicates,"
                         " dead_lettered, updated_at FROM dedupd.offsets WHERE namespace = $1"
                         " ORDER BY topic, partition",
                         1, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(r) == PGRES_TUPLES_OK) {
                printf("progress per partition:\n");
                print_result(r);
        } else if (!rc) {
                fprintf(stderr, "dedupctl: %s", PQerrorMessage(s.conn));
                rc = 2;
        }
        PQclear(r);
        store_close(&s);
        return rc;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                {"config", required_argument, NULL, 'c'},
                {"help", no_argument, NULL, 'h'},
                {NULL, 0, NULL, 0},
        };
        const char *path = NULL, *cmd;
        struct config *cfg;
        int opt, rc;

        log_set_level(LOG_WARN);
        if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
                usage(argc < 2 ? stderr : stdout);
                return argc < 2 ? 2 : 0;
        }
        cmd = argv[1];
        if (!strcmp(cmd, "help-config")) {
                config_print_reference(stdout);
                return 0;
        }
        optind = 2;
        while ((opt = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
                switch (opt) {
                case 'c': path = optarg; break;
                case 'h': usage(stdout); return 0;
                default: usage(stderr); return 2;
                }
        }
        if (strcmp(cmd, "check") && strcmp(cmd, "migrate") && strcmp(cmd, "inspect") &&
            strcmp(cmd, "stats")) {
                fprintf(stderr, "dedupctl: unknown command '%s'\n", cmd);
                usage(stderr);
                return 2;
        }
        if (!path) {
                fprintf(stderr, "dedupctl %s: -c FILE is required\n", cmd);
                return 2;
        }
        if (!strcmp(cmd, "inspect") ? optind != argc - 1 : optind != argc) {
                fprintf(stderr, "dedupctl %s: %s\n", cmd,
                        !strcmp(cmd, "inspect") ? "expects exactly one KEY" : "unexpected argument");
                return 2;
        }
        cfg = load(path);
        if (!cfg)
                return !strcmp(cmd, "check") ? 1 : 2;
        if (!strcmp(cmd, "check"))
                rc = cmd_check(cfg);
        else if (!strcmp(cmd, "migrate"))
                rc = cmd_migrate(cfg);
        else if (!strcmp(cmd, "inspect"))
                rc = cmd_inspect(cfg, argv[optind]);
        else
                rc = cmd_stats(cfg);
        config_free(cfg);
        return rc;
}
