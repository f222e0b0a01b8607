/* dedupd: the daemon's main — config, signals, database, handlers, consumer, in that order. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "base/config.h"

#include "base/mem.h"
#include "core/runner.h"
#include "source/kafka/consumer.h"
#include "base/lint.h"
#include "source/kafka/producer.h"
#include "base/log.h"
#include "base/version.h"
#include "core/pipeline.h"
#include "core/retention.h"
#include "pg/store.h"
#include "pg/schema.h"
#include "source/kafka/topics.h"
#include "core/watchdog.h"
#include "ops/health.h"
#include "ops/http.h"
#include "ops/metrics.h"
#include "ops/notify.h"

static volatile sig_atomic_t stop_requested, reload_requested;
static int shutdown_timeout_s = 10;

/* Only sets a flag; the main loop does the work. A second signal is the
 * operator insisting: leave now (nothing uncommitted is acknowledged, so
 * nothing is lost). */
static void on_hup(int sig)
{
        (void)sig;
        reload_requested = 1;
}

static void on_signal(int sig)
{
        if (sig == SIGALRM)
                _exit(3);
        if (stop_requested)
                _exit(128 + sig);
        stop_requested = 1;
        alarm((unsigned)shutdown_timeout_s);
}

static void usage(FILE *fp)
{
        fprintf(fp,
                "Usage: dedupd -c FILE [options]\n"
                "\n"
                "Consume Kafka topics and apply each message's effect exactly once per business\n"
                "key: the key is claimed in the dedup table and the handler runs in the same\n"
                "PostgreSQL transaction; Kafka offsets are committed only after COMMIT.\n"
                "\n"
                "Options:\n"
                "  -c, --config FILE     YAML configuration (required)\n"
                "  -l, --log-level LVL   error, warn, info or debug (overrides log_level)\n"
                "      --help-config     print every configuration key with its default\n"
                "  -V, --version         print versions and exit\n"
                "  -h, --help            this help\n"
                "\n"
                "Signals: SIGTERM/SIGINT finish or roll back the batch in flight, commit what is\n"
                "committed, leave the group and exit 0 (within shutdown_timeout_ms; exit 3 when it\n"
                "is exceeded). A second signal exits at once. SIGHUP reads the file again and\n"
                "applies the settings marked [reloads on SIGHUP] in --help-config (log level,\n"
                "batch limits, purge schedule) without leaving the group; a bad file changes nothing.\n"
                "\n"
                "Exit codes: 0 clean stop, 1 runtime failure, 2 bad usage or configuration,\n"
                "3 shutdown timeout, 4 a batch stalled past batch.timeout_ms (the watchdog ended it).\n"
                "Check a configuration without running: dedupctl check -c FILE\n");
}

/* What the daemon is made of, in the order it is built (freed in reverse). */
struct daemon {
        struct config *cfg;
        int64_t *dlq_max_bytes; /* per topic, what its dead-letter topic takes */
        struct store *store;
        struct producer *producer;
        struct pipeline *pl;
        struct watchdog *wd;
        struct runner *runner;
        struct source *src;
        struct http *http;
        const char *cli_level; /* -l: wins over log_level, also after a reload */
};

/* The arguments; returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, const char **path, const char **level)
{
        static const struct option opts[] = {
                {"config", required_argument, NULL, 'c'}, {"log-level", required_argument, NULL, 'l'},
                {"help-config", no_argument, NULL, 'H'},  {"version", no_argument, NULL, 'V'},
                {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
        };
        int opt;
        while ((opt = getopt_long(argc, argv, "c:l:Vh", opts, NULL)) != -1) {
                switch (opt) {
                case 'c': *path = optarg; break;
                case 'l': *level = optarg; break;
                case 'H': config_print_reference(stdout); return 0;
                case 'V': version_print(stdout, "dedupd"); return 0;
                case 'h': usage(stdout); return 0;
                default: usage(stderr); return 2;
                }
        }
        if (!*path || optind < argc) {
                fprintf(stderr, "dedupd: %s\n", *path ? "unexpected argument" : "-c FILE is required");
                usage(stderr);
                return 2;
        }
        if (*level && log_level_parse(*level) < 0) {
                fprintf(stderr, "dedupd: unknown log level '%s'\n", *level);
                return 2;
        }
        return -1;
}

/* Signals only set a flag (or end the process): the loop does the work. */
static void catch_signals(void)
{
        struct sigaction sa = {0};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGALRM, &sa, NULL);
        sa.sa_handler = on_hup;
        sigaction(SIGHUP, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
}

/* What the operator watches, up before anything can fail slowly: the
 * metrics, /healthz and /readyz (when http.listen is set), systemd's
 * watchdog interval. */
static int start_ops(struct daemon *d)
{
        char err[512], abi[16], pq[16];
        const struct config *cfg = d->cfg;
        int64_t stall_ms = 30000;
        const char *names[cfg->topic_cnt ? cfg->topic_cnt : 1];
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                names[i] = cfg->topics[i].name;
                if (cfg->topics[i].batch_timeout_ms * 2 + 30000 > stall_ms)
                        stall_ms = cfg->topics[i].batch_timeout_ms * 2 + 30000;
        }
        snprintf(abi, sizeof(abi), "%d", DEDUPD_HANDLER_ABI_MAJOR);
        metrics_init();
        metrics_build_info(DEDUPD_VERSION, abi, rd_kafka_version_str(), version_libpq(pq, sizeof(pq)));
        health_init(stall_ms, cfg->topic_cnt, names);
        health_beat(log_now_ms());
        int64_t wd = notify_init();
        if (wd)
                log_info("dedupd", "systemd watchdog every %lld ms", (long long)wd);
        if (!*cfg->http_listen)
                return 0;
        if (!(d->http = http_start(cfg->http_listen, err, sizeof(err)))) {
                log_error("dedupd", "%s", err);
                return 2;
        }
        log_info("dedupd", "serving /metrics, /healthz and /readyz on http://%s", http_address(d->http));
        return 0;
}

/* The database first: handlers' init() needs it, and a consumer must not
 * join the group before it can commit anything. Waits for it (a clean stop
 * still works meanwhile); 1: stopped while waiting. */
static int connect_store(struct daemon *d)
{
        const struct config *cfg = d->cfg;
        struct log_ratelimit rl = {0};
        char err[1024];
        int wait_ms = 200;
        /* Longer than any batch may run (the watchdog ends those first) plus
         * a dead-letter write inside a transaction. */
        int idle_tx_ms = 30000;
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                if (cfg->topics[i].batch_timeout_ms * 2 + 30000 > idle_tx_ms)
                        idle_tx_ms = cfg->topics[i].batch_timeout_ms * 2 + 30000;
        d->store = store_new(cfg->pg_conninfo, idle_tx_ms);
        while (store_connect(d->store, err, sizeof(err)) != STORE_OK) {
                health_beat(log_now_ms()); /* alive, waiting: not ready */
                if (stop_requested)
                        return 1;
                if (log_ratelimit_ok(&rl, 1, 10000))
                        log_error("dedupd", "database unavailable: %s (retrying)", err);
                usleep((useconds_t)wait_ms * 1000);
                wait_ms = wait_ms * 2 > cfg->db_retry_max_ms ? cfg->db_retry_max_ms : wait_ms * 2;
        }
        log_info("dedupd", "connected to PostgreSQL %s", store_target(d->store));
        return 0;
}

/* Everything that must hold before the group is joined; the exit code on failure, -1 to go on. */
static int prepare(struct daemon *d)
{
        char err[1024];
        lint_config(d->cfg, NULL, NULL); /* key-design warnings, logged */
        /* Every topic and dead-letter topic exists (or is created,
         * dead_letter.create), dead letters fit, no class keeps keys shorter
         * than its topic keeps messages. A broker that does not answer: warned. */
        d->dlq_max_bytes = xcalloc(d->cfg->topic_cnt, sizeof(*d->dlq_max_bytes));
        if (topics_check(d->cfg, TOPICS_CREATE_MISSING, TOPICS_CHECK_TIMEOUT_MS, NULL, NULL, d->dlq_max_bytes, err,
                         sizeof(err)))
                return 2;
        if (connect_store(d))
                return 0;
        if (store_migrate(d->store, err, sizeof(err))) {
                log_error("dedupd", "schema migration failed: %s", err);
                return 1;
        }
        if (!(d->producer = producer_new(d->cfg, d->dlq_max_bytes, err, sizeof(err)))) {
                log_error("dedupd", "Kafka producer: %s", err);
                return 1;
        }
        if (!(d->pl = pipeline_new(d->cfg, d->store, producer_sink(d->producer), err, sizeof(err)))) {
                log_error("dedupd", "%s", err);
                return 2;
        }
        if (!(d->wd = watchdog_start(err, sizeof(err)))) {
                log_error("dedupd", "%s", err);
                return 1;
        }
        pipeline_set_watchdog(d->pl, d->wd);
        return -1;
}

/* SIGHUP, between batches: the file again; what reloads is applied, a bad
 * file changes nothing. */
static void reload_config(void *opaque)
{
        struct daemon *d = opaque;
        struct config_errors errs = {0};
        char applied[2048], restart[2048];
        notify_reloading();
        if (config_reload(d->cfg, d->cfg->path, &errs, applied, sizeof(applied), restart, sizeof(restart))) {
                for (size_t i = 0; i < errs.cnt; i++)
                        log_error("reload", "%s", errs.msgs[i]);
                log_error("reload", "SIGHUP: %s refused, the running configuration stays", d->cfg->path);
        } else {
                log_set_level(d->cli_level ? log_level_parse(d->cli_level) : d->cfg->log_level);
                log_warn("reload", "SIGHUP: %s reloaded: %s", d->cfg->path, applied[0] ? applied : "nothing changed");
                if (restart[0])
                        log_warn("reload", "changed, but only a restart applies it: %s", restart);
        }
        config_errors_clear(&errs);
        notify_ready("configuration reloaded");
}

/* Join the group and run until a signal; the exit code. */
static int run(struct daemon *d)
{
        char err[1024];
        d->runner = runner_new(d->cfg, d->store, d->pl, producer_sink(d->producer));
        runner_on_reload(d->runner, &reload_requested, reload_config, d);
        if (!(d->src = kafka_source_new(d->cfg, runner_events(d->runner), err, sizeof(err)))) {
                log_error("dedupd", "Kafka consumer: %s", err);
                return 1;
        }
        if (runner_run(d->runner, d->src, &stop_requested, err, sizeof(err))) {
                log_error("dedupd", "%s", err);
                return 1;
        }
        return 0;
}

static void daemon_free(struct daemon *d)
{
        http_stop(d->http);
        if (d->src)
                d->src->ops->destroy(d->src);
        runner_free(d->runner);
        watchdog_stop(d->wd);
        pipeline_free(d->pl);
        producer_free(d->producer);
        store_free(d->store);
        config_free(d->cfg);
        free(d->dlq_max_bytes);
        health_free();
        metrics_free();
}

int main(int argc, char **argv)
{
        const char *path = NULL, *level = NULL;
        struct config_errors errs = {0};
        struct daemon d = {0};
        int rc = parse_args(argc, argv, &path, &level);

        if (rc >= 0)
                return rc;
        if (!(d.cfg = config_load(path, &errs))) {
                for (size_t i = 0; i < errs.cnt; i++)
                        fprintf(stderr, "%s\n", errs.msgs[i]);
                config_errors_clear(&errs);
                return 2;
        }
        log_set_level(level ? log_level_parse(level) : d.cfg->log_level);
        d.cli_level = level;
        shutdown_timeout_s = (d.cfg->shutdown_timeout_ms + 999) / 1000;
        catch_signals();
        log_info("dedupd", "starting: namespace %s, %zu topic(s), config %s", d.cfg->namespace, d.cfg->topic_cnt,
                 path);
        if ((rc = start_ops(&d)) == 0 && (rc = prepare(&d)) < 0)
                rc = stop_requested ? 0 : run(&d);
        notify_stopping();
        if (rc == 0)
                log_info("dedupd", "stopped cleanly");
        daemon_free(&d);
        return rc;
}
