/* dedupd: the daemon's main — config, signals, database, handlers, consumer, in that order. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "base/config.h"
#include "core/runner.h"
#include "source/kafka/consumer.h"
#include "base/lint.h"
#include "source/kafka/producer.h"
#include "base/log.h"
#include "core/pipeline.h"
#include "core/retention.h"
#include "pg/store.h"
#include "pg/schema.h"
#include "source/kafka/topics.h"
#include "core/watchdog.h"

static volatile sig_atomic_t stop_requested;
static int shutdown_timeout_s = 10;

/* Only sets a flag; the main loop does the work. A second signal is the
 * operator insisting: leave now (nothing uncommitted is acknowledged, so
 * nothing is lost). */
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
                "is exceeded). A second signal exits at once.\n"
                "\n"
                "Exit codes: 0 clean stop, 1 runtime failure, 2 bad usage or configuration,\n"
                "3 shutdown timeout, 4 a batch stalled past batch.timeout_ms (the watchdog ended it).\n"
                "Check a configuration without running: dedupctl check -c FILE\n");
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                {"config", required_argument, NULL, 'c'}, {"log-level", required_argument, NULL, 'l'},
                {"help-config", no_argument, NULL, 'H'},  {"version", no_argument, NULL, 'V'},
                {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
        };
        const char *path = NULL, *level = NULL;
        struct config_errors errs = {0};
        struct config *cfg = NULL;
        struct store *store = NULL;
        struct producer *producer = NULL;
        struct pipeline *pl = NULL;
        struct runner *runner = NULL;
        struct source *src = NULL;
        struct watchdog *wd = NULL;
        int64_t *dlq_max_bytes = NULL; /* per topic, what its dead-letter topic takes */
        char err[1024];
        int opt, rc = 1;

        while ((opt = getopt_long(argc, argv, "c:l:Vh", opts, NULL)) != -1) {
                switch (opt) {
                case 'c': path = optarg; break;
                case 'l': level = optarg; break;
                case 'H': config_print_reference(stdout); return 0;
                case 'V':
                        printf("dedupd %s (handler ABI %d, librdkafka %s, libpq %d)\n", DEDUPD_VERSION,
                               DEDUPD_HANDLER_ABI_MAJOR, rd_kafka_version_str(), PQlibVersion());
                        return 0;
                case 'h': usage(stdout); return 0;
                default: usage(stderr); return 2;
                }
        }
        if (!path || optind < argc) {
                fprintf(stderr, "dedupd: %s\n", path ? "unexpected argument" : "-c FILE is required");
                usage(stderr);
                return 2;
        }
        if (level && log_level_parse(level) < 0) {
                fprintf(stderr, "dedupd: unknown log level '%s'\n", level);
                return 2;
        }
        cfg = config_load(path, &errs);
        if (!cfg) {
                for (size_t i = 0; i < errs.cnt; i++)
                        fprintf(stderr, "%s\n", errs.msgs[i]);
                config_errors_clear(&errs);
                return 2;
        }
        log_set_level(log_level_parse(level ? level : cfg->log_level));
        shutdown_timeout_s = (cfg->shutdown_timeout_ms + 999) / 1000;

        struct sigaction sa = {0};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGALRM, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);

        dlq_max_bytes = calloc(cfg->topic_cnt, sizeof(*dlq_max_bytes));
        if (!dlq_max_bytes) {
                log_error("dedupd", "out of memory");
                goto out;
        }
        log_info("dedupd", "starting: namespace %s, %zu topic(s), config %s", cfg->namespace,
                 cfg->topic_cnt, path);
        lint_config(cfg, NULL, NULL); /* key-design warnings, logged */
        /* Before joining the group: every topic and dead-letter topic exists
         * (or is created, dead_letter.create), dead letters fit, no class
         * keeps keys shorter than its topic keeps messages. A broker that
         * does not answer: warned. */
        if (topics_check(cfg, TOPICS_CREATE_MISSING, TOPICS_CHECK_TIMEOUT_MS, NULL, NULL, dlq_max_bytes, err,
                         sizeof(err))) {
                rc = 2;
                goto out;
        }

        /* The database first: handlers' init() needs it, and a consumer must
         * not join the group before it can commit anything. */
        /* Longer than any batch may run (the watchdog ends those first) plus
         * a dead-letter write inside a transaction. */
        int idle_tx_ms = 30000;
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                if (cfg->topics[i].batch_timeout_ms * 2 + 30000 > idle_tx_ms)
                        idle_tx_ms = cfg->topics[i].batch_timeout_ms * 2 + 30000;
        store = store_new(cfg->pg_conninfo, idle_tx_ms);
        int wait_ms = 200;
        struct log_ratelimit rl = {0};
        while (store_connect(store, err, sizeof(err)) != STORE_OK) {
                if (stop_requested)
                        goto out_ok;
                if (log_ratelimit_ok(&rl, 1, 10000))
                        log_error("dedupd", "database unavailable: %s (retrying)", err);
                usleep((useconds_t)wait_ms * 1000);
                wait_ms = wait_ms * 2 > cfg->db_retry_max_ms ? cfg->db_retry_max_ms : wait_ms * 2;
        }
        log_info("dedupd", "connected to PostgreSQL %s", store_target(store));
        if (store_migrate(store, err, sizeof(err))) {
                log_error("dedupd", "schema migration failed: %s", err);
                goto out;
        }
        producer = producer_new(cfg, dlq_max_bytes, err, sizeof(err));
        if (!producer) {
                log_error("dedupd", "Kafka producer: %s", err);
                goto out;
        }
        pl = pipeline_new(cfg, store, producer_sink(producer), err, sizeof(err));
        if (!pl) {
                log_error("dedupd", "%s", err);
                rc = 2;
                goto out;
        }
        wd = watchdog_start(err, sizeof(err));
        if (!wd) {
                log_error("dedupd", "%s", err);
                goto out;
        }
        pipeline_set_watchdog(pl, wd);
        runner = runner_new(cfg, store, pl, producer_sink(producer));
        src = kafka_source_new(cfg, runner_events(runner), err, sizeof(err));
        if (!src) {
                log_error("dedupd", "Kafka consumer: %s", err);
                goto out;
        }
        if (runner_run(runner, src, &stop_requested, err, sizeof(err))) {
                log_error("dedupd", "%s", err);
                goto out;
        }
out_ok:
        rc = 0;
        log_info("dedupd", "stopped cleanly");
out:
        if (src)
                src->ops->destroy(src);
        runner_free(runner);
        watchdog_stop(wd);
        pipeline_free(pl);
        producer_free(producer);
        store_free(store);
        config_free(cfg);
        free(dlq_max_bytes);
        return rc;
}
