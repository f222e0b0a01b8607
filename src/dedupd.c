/* dedupd: the daemon's main — config, signals, database, handlers, consumer, in that order. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"
#include "base/hostport.h"

#include "base/mem.h"
#include "core/runner.h"
#include "core/sink_lock.h"
#include "base/lint.h"
#include "base/log.h"
#include "ops/version.h"
#include "core/pipeline.h"
#include "core/retention.h"
#include "core/buckets.h"
#include "pg/conninfo.h"
#include "pg/layout.h"
#include "pg/replication.h"
#include "pg/store.h"
#include "pg/schema.h"
#include "core/parallel.h"
#include "core/watchdog.h"
#include "source/brokers.h"
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
        fprintf(fp, "Usage: dedupd -c FILE [options]\n"
                    "\n"
                    "Consume Kafka topics (or NATS JetStream subjects, source: nats, or RabbitMQ\n"
                    "queues, source: rabbitmq) and apply each message's effect exactly once per\n"
                    "business key: the key is claimed in the dedup table and the handler runs in the\n"
                    "same PostgreSQL transaction; Kafka offsets (or JetStream and RabbitMQ acks) are\n"
                    "committed only after COMMIT.\n"
                    "\n"
                    "Options:\n"
                    "  -c, --config FILE     YAML configuration (required)\n"
                    "  -l, --log-level LVL   error, warn, info or debug (overrides log_level)\n"
                    "      --log-format FMT  human or json: one JSON object a line (overrides log_format)\n"
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
                    "Startup (reaching the broker and the database, joining the group) must end within\n"
                    "startup_timeout_ms, or dedupd exits 1 saying what it was waiting for.\n"
                    "\n"
                    "Exit codes: 0 clean stop, 1 runtime failure, 2 bad usage or configuration,\n"
                    "3 shutdown timeout, 4 a batch stalled past batch.timeout_ms (the watchdog ended it).\n"
                    "Check a configuration without running: dedupctl check -c FILE\n");
}

/* What the daemon is made of, in the order it is built (freed in reverse). */
struct daemon {
        struct config *cfg;
        const struct broker *broker; /* the one the configuration names */
        struct broker_run *run;      /* its side of this daemon: connection, publisher */
        int64_t deadline_ms;         /* startup must be over by then (log_now_ms()); 0: no deadline */
        struct store *store;
        struct pipeline *pl;
        struct watchdog *wd;
        int idle_tx_ms;              /* idle_in_transaction_session_timeout of every connection */
        struct worker_conn *workers; /* workers > 1: each worker's connection and watchdog */
        struct sink sink;            /* what the pipeline and the relay publish through */
        struct sink_lock sink_lock;  /* workers > 1 or parallel topics: the sink, one call at a time */
        int sink_locked;
        struct par_helper *helpers; /* parallel topics: each lane's connections for its workers 2.. */
        size_t nhelpers;            /* of them in all */
        struct runner *runner;
        struct source *src;
        struct http *http;
        const char *cli_level; /* -l: wins over log_level, also after a reload */
};

/* What the command line sets. */
struct args {
        const char *path, *level, *format;
};

/* The arguments; returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, struct args *a)
{
        static const struct option opts[] = {
                {"config", required_argument, NULL, 'c'},
                {"log-level", required_argument, NULL, 'l'},
                {"log-format", required_argument, NULL, 'F'},
                {"help-config", no_argument, NULL, 'H'},
                {"version", no_argument, NULL, 'V'},
                {"help", no_argument, NULL, 'h'},
                {NULL, 0, NULL, 0},
        };
        int opt;
        while ((opt = getopt_long(argc, argv, "c:l:Vh", opts, NULL)) != -1) {
                switch (opt) {
                case 'c': a->path = optarg; break;
                case 'l': a->level = optarg; break;
                case 'F': a->format = optarg; break;
                case 'H': config_print_reference(stdout); return 0;
                case 'V': version_print(stdout, "dedupd"); return 0;
                case 'h': usage(stdout); return 0;
                default: usage(stderr); return 2;
                }
        }
        if (!a->path || optind < argc) {
                fprintf(stderr, "dedupd: %s\n", a->path ? "unexpected argument" : "-c FILE is required");
                usage(stderr);
                return 2;
        }
        if (a->level && log_level_parse(a->level) < 0) {
                fprintf(stderr, "dedupd: unknown log level '%s'\n", a->level);
                return 2;
        }
        if (a->format && log_format_parse(a->format) < 0) {
                fprintf(stderr, "dedupd: unknown log format '%s' (human or json)\n", a->format);
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
        char err[512], abi[16], pq[16], client[128];
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
        metrics_build_info(DEDUPD_VERSION, abi, d->broker->versions(client, sizeof(client)),
                           version_libpq(pq, sizeof(pq)));
        health_init(stall_ms, cfg->topic_cnt, names);
        health_beat(log_now_ms());
        int64_t wd = notify_init();
        if (wd)
                log_info("dedupd", "systemd watchdog every %lld ms", (long long)wd);
        if (!*cfg->http_listen)
                return 0;
        struct http_opts ho = {cfg->http_listen, (unsigned)cfg->http_max_connections,
                               (unsigned)cfg->http_max_connections_per_ip, (unsigned)cfg->http_idle_timeout_s};
        if (!(d->http = http_start(&ho, err, sizeof(err)))) {
                log_error("dedupd", "%s", err);
                return 2;
        }
        log_info("dedupd", "serving /metrics, /healthz and /readyz on http://%s", http_address(d->http));
        if (!hostport_loopback(cfg->http_listen))
                log_warn("dedupd", "http.listen %s is not a loopback address: %s", cfg->http_listen,
                         HTTP_EXPOSED_WARNING);
        return 0;
}

/* Milliseconds left before the startup deadline (INT64_MAX: none). */
static int64_t startup_left(const struct daemon *d)
{
        return d->deadline_ms ? d->deadline_ms - log_now_ms() : INT64_MAX;
}

/* Sleep up to ms, less when the deadline or a signal comes first. */
static void startup_pause(const struct daemon *d, int ms)
{
        int64_t until = log_now_ms() + ms;
        while (!stop_requested && log_now_ms() < until && startup_left(d) > 0)
                usleep(20 * 1000);
}

/* After a failed startup attempt: 0 when a stop was asked for, 1 when the
 * deadline has passed (said at ERROR, naming what was awaited), -1 to try
 * again. */
static int startup_gives_up(const struct daemon *d, struct log_ratelimit *rl, const char *what, const char *err)
{
        if (stop_requested)
                return 0;
        if (startup_left(d) > 0)
                return -1;
        log_ratelimit_flush(rl); /* before the last word */
        log_error("dedupd", "startup: gave up after %d ms (startup_timeout_ms) waiting for %s: %s",
                  d->cfg->startup_timeout_ms, what, err);
        return 1;
}

/* The broker's side of startup (Kafka's topics, NATS's stream, RabbitMQ's
 * queues, as the broker checks them): while it does not answer, wait (a
 * clean stop still works) until the startup deadline. The exit code, or -1
 * to go on. */
static int check_broker(struct daemon *d)
{
        struct log_ratelimit rl = {0};
        char err[1600];
        int rc = -1;
        for (;;) {
                int64_t left = startup_left(d);
                enum broker_probe p =
                        d->broker->probe(d->run, left < INT32_MAX ? (int)left : INT32_MAX, err, sizeof(err));
                if (p != BROKER_WAIT) {
                        log_ratelimit_flush(&rl);
                        if (p == BROKER_REFUSED) /* a wrong CA or password: no wait mends it */
                                log_error("dedupd", "startup: %s", err);
                        else if (p == BROKER_INVALID && err[0])
                                log_error("dedupd", "%s", err);
                        rc = p == BROKER_READY ? -1 : p == BROKER_REFUSED ? 1 : 2;
                        break;
                }
                health_beat(log_now_ms()); /* alive, waiting: not ready */
                log_limited(&rl, 1, 10000, LOG_WARN, "dedupd", "waiting for %s: %s (retrying)", d->broker->awaited,
                            err);
                startup_pause(d, 1000);
                if ((rc = startup_gives_up(d, &rl, d->broker->awaited, err)) >= 0)
                        break;
        }
        log_ratelimit_flush(&rl);
        return rc;
}

/* The database first: handlers' init() needs it, and a consumer must not
 * join the group before it can commit anything. Waits for it (a clean stop
 * still works meanwhile) until the startup deadline; each attempt is bounded
 * by connect_timeout and ends by the deadline. The exit code, or -1 to go on. */
static int connect_store(struct daemon *d)
{
        const struct config *cfg = d->cfg;
        struct log_ratelimit rl = {0};
        struct conninfo_params p;
        char err[1024], what[300];
        int wait_ms = 200, rc = -1;
        /* Longer than any batch may run (the watchdog ends those first) plus
         * a dead-letter write inside a transaction. */
        int idle_tx_ms = 30000;
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                if (cfg->topics[i].batch_timeout_ms * 2 + 30000 > idle_tx_ms)
                        idle_tx_ms = cfg->topics[i].batch_timeout_ms * 2 + 30000;
        /* A conninfo that does not parse never will: refused, not retried. */
        if (conninfo_params_init(&p, cfg->pg_conninfo, STORE_CONNECT_TIMEOUT_S, 0, err, sizeof(err))) {
                store_one_line(err);
                log_error("dedupd", "postgres.conninfo: %s", err);
                return 2;
        }
        conninfo_params_free(&p);
        d->idle_tx_ms = idle_tx_ms;
        d->store = store_new(cfg->pg_conninfo, idle_tx_ms);
        store_set_connect_deadline(d->store, d->deadline_ms);
        while (store_connect(d->store, err, sizeof(err)) != STORE_OK) {
                log_limited(&rl, 1, 10000, LOG_WARN, "dedupd", "database unavailable: %s: %s (retrying)",
                            store_target(d->store), err);
                startup_pause(d, wait_ms);
                wait_ms = wait_ms * 2 > cfg->db_retry_max_ms ? cfg->db_retry_max_ms : wait_ms * 2;
                snprintf(what, sizeof(what), "the database %s", store_target(d->store));
                if ((rc = startup_gives_up(d, &rl, what, err)) >= 0)
                        break;
        }
        log_ratelimit_flush(&rl);
        if (rc >= 0)
                return rc;
        /* From here on the runner reconnects for as long as it takes. */
        store_set_connect_deadline(d->store, 0);
        log_info("dedupd", "connected to PostgreSQL %s", store_target(d->store));
        return -1;
}

/* A current schema is only read: a role that owns nothing (see docs/operating.md,
 * Database roles) starts. One behind is migrated when the role may, and
 * otherwise the error names the command that migrates it. -1 to go on. */
static int schema_ready(struct daemon *d)
{
        char err[1024];
        int applied, known;
        if (store_schema_version(d->store, &applied, &known, err, sizeof(err))) {
                log_error("dedupd", "cannot read the version of schema dedupd: %s", err);
                return 1;
        }
        if (applied == known) {
                log_debug("dedupd", "schema dedupd is at version %d: nothing to migrate", applied);
                return -1;
        }
        if (applied > known) {
                log_error("dedupd",
                          "schema dedupd is at version %d but this dedupd knows only %d: it was migrated by a "
                          "newer dedupd",
                          applied, known);
                return 1;
        }
        if (store_migrate(d->store, err, sizeof(err))) {
                log_error("dedupd",
                          "schema dedupd is at version %d of %d and migrating it failed: %s (run `dedupctl migrate "
                          "-c FILE` as the role that owns schema dedupd, then start dedupd again)",
                          applied, known, err);
                return 1;
        }
        return -1;
}

/* keys.layout: the namespace's keys in the table the claim reads, and
 * under partitioned the partitions ahead made. -1 to go on. */
static int keys_ready(struct daemon *d)
{
        char err[1024];
        if (buckets_prepare(d->store, d->cfg, err, sizeof(err))) {
                log_error("dedupd", "%s", err);
                return 1;
        }
        return -1;
}

/* A broker that cannot redeliver what it acknowledged (RabbitMQ): a failover
 * is safe only with synchronous replication; said at start-up when the
 * server reports none. */
static void warn_replication(struct daemon *d)
{
        struct store_replication r;
        char err[512], why[256];
        if (!d->broker->acks_final)
                return;
        if (store_replication_read(d->store, &r, err, sizeof(err)) != STORE_OK)
                log_warn("dedupd", "cannot read the database's replication settings: %s", err);
        else if (!replication_sync(&r, why, sizeof(why)))
                log_warn("dedupd", "database %s: %s: %s", store_target(d->store), why, REPLICATION_ADVICE);
}

/* workers > 1: one lane each, on a connection and a watchdog of its own (the
 * daemon's own connection stays the loop's: positions, relay, housekeeping).
 * A connection that fails now is made again before the worker's first batch. */
struct worker_conn {
        struct store *store;
        struct watchdog *wd;
};

static int start_workers(struct daemon *d, char *err, size_t errsz)
{
        size_t n = (size_t)d->cfg->workers;
        char why[512];
        d->workers = xcalloc(n, sizeof(*d->workers));
        for (size_t i = 0; i < n; i++) {
                struct worker_conn *w = &d->workers[i];
                w->store = store_new(d->cfg->pg_conninfo, d->idle_tx_ms);
                if (store_connect(w->store, why, sizeof(why)) != STORE_OK)
                        log_warn("dedupd",
                                 "worker %zu: database unavailable: %s: %s (it retries before its first batch)", i + 1,
                                 store_target(w->store), why);
                if (!(w->wd = watchdog_start(err, errsz)))
                        return -1;
                pipeline_add_lane(d->pl, w->store, w->wd);
        }
        log_info("dedupd", "%zu partition workers, each on a connection of its own", n);
        return 0;
}

/* Parallel topics: each lane lends its parallel workers 2.. a connection
 * and a watchdog each (lanes x parallel.workers connections in all). */
static int start_helpers(struct daemon *d, char *err, size_t errsz)
{
        size_t per = pipeline_parallel_helpers(d->cfg), lanes = pipeline_lanes(d->pl);
        char why[512];
        if (!per)
                return 0;
        d->helpers = xcalloc(per * lanes, sizeof(*d->helpers));
        for (size_t i = 0; i < per * lanes; i++) {
                struct par_helper *h = &d->helpers[i];
                h->store = store_new(d->cfg->pg_conninfo, d->idle_tx_ms);
                d->nhelpers++;
                if (store_connect(h->store, why, sizeof(why)) != STORE_OK)
                        log_warn("dedupd",
                                 "parallel worker connection: database unavailable: %s: %s (it retries "
                                 "before its first batch)",
                                 store_target(h->store), why);
                if (!(h->wd = watchdog_start(err, errsz)))
                        return -1;
        }
        for (size_t l = 0; l < lanes; l++)
                pipeline_add_helpers(d->pl, l, &d->helpers[l * per], per);
        log_info("dedupd", "parallel keys: %zu database connection(s) for batches (%zu lane(s) x %zu parallel workers)",
                 lanes * (per + 1), lanes, per + 1);
        return 0;
}

static void stop_helpers(struct daemon *d)
{
        for (size_t i = 0; i < d->nhelpers; i++) {
                watchdog_stop(d->helpers[i].wd);
                store_free(d->helpers[i].store);
        }
        free(d->helpers);
}

static void stop_workers(struct daemon *d)
{
        for (size_t i = 0; d->workers && i < (size_t)d->cfg->workers; i++) {
                watchdog_stop(d->workers[i].wd);
                store_free(d->workers[i].store);
        }
        free(d->workers);
        if (d->sink_locked)
                sink_lock_destroy(&d->sink_lock);
}

/* Everything that must hold before the group is joined; the exit code on failure, -1 to go on. */
static int prepare(struct daemon *d)
{
        char err[1024];
        int rc;
        struct sink sink;
        lint_config(d->cfg, NULL, NULL); /* key-design warnings, logged */
        d->run = d->broker->open(d->cfg);
        if ((rc = check_broker(d)) >= 0 || (rc = connect_store(d)) >= 0)
                return rc;
        if ((rc = schema_ready(d)) >= 0 || (rc = keys_ready(d)) >= 0)
                return rc;
        warn_replication(d);
        if (d->broker->sink(d->run, &sink, err, sizeof(err))) {
                log_error("dedupd", "%s", err);
                return 1;
        }
        d->sink_locked = d->cfg->workers > 1 || pipeline_parallel_helpers(d->cfg) > 0;
        d->sink = d->sink_locked ? sink_locked(&d->sink_lock, sink) : sink;
        if (!(d->pl = pipeline_new(d->cfg, d->store, d->sink, err, sizeof(err)))) {
                log_error("dedupd", "%s", err);
                return 2;
        }
        if (d->cfg->workers > 1 && pipeline_concurrent(d->pl, 0, err, sizeof(err))) {
                log_error("dedupd", "workers: %d: %s", d->cfg->workers, err);
                return 2;
        }
        if (pipeline_concurrent(d->pl, 1, err, sizeof(err))) {
                log_error("dedupd", "parallel.workers: %s", err);
                return 2;
        }
        if (!(d->wd = watchdog_start(err, sizeof(err)))) {
                log_error("dedupd", "%s", err);
                return 1;
        }
        if (d->cfg->workers == 1)
                pipeline_add_lane(d->pl, d->store, d->wd);
        else if (start_workers(d, err, sizeof(err))) {
                log_error("dedupd", "%s", err);
                return 1;
        }
        if (start_helpers(d, err, sizeof(err))) {
                log_error("dedupd", "%s", err);
                return 1;
        }
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
        if (!(d->runner = runner_new(d->cfg, d->store, d->pl, d->sink, err, sizeof(err)))) {
                log_error("dedupd", "%s", err);
                return 1;
        }
        runner_on_reload(d->runner, &reload_requested, reload_config, d);
        if (!(d->src = d->broker->source(d->run, runner_events(d->runner), d->deadline_ms, d->cfg->startup_timeout_ms,
                                         err, sizeof(err)))) {
                log_error("dedupd", "%s", err);
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
        stop_helpers(d);
        stop_workers(d);
        if (d->broker)
                d->broker->close(d->run);
        store_free(d->store);
        config_free(d->cfg);
        health_free();
        metrics_free();
}

/* Config errors as they are (file:line:column: message), or as JSON log
 * lines when --log-format json asks for nothing else. */
static void report_config_errors(struct config_errors *errs, int json)
{
        for (size_t i = 0; i < errs->cnt; i++)
                if (json)
                        log_error("config", "%s", errs->msgs[i]);
                else
                        fprintf(stderr, "%s\n", errs->msgs[i]);
        config_errors_clear(errs);
}

int main(int argc, char **argv)
{
        struct args a = {0};
        struct config_errors errs = {0};
        struct daemon d = {0};
        int rc = parse_args(argc, argv, &a);

        if (rc >= 0)
                return rc;
        if (a.format)
                log_set_format((enum log_format)log_format_parse(a.format)); /* the flag wins */
        if (!(d.cfg = config_load(a.path, &errs))) {
                report_config_errors(&errs, a.format && log_format_parse(a.format) == LOG_FORMAT_JSON);
                return 2;
        }
        d.broker = broker_of(d.cfg); /* the one lookup: the rest goes through it */
        keys_layout_from_config(d.cfg);
        log_set_level(a.level ? log_level_parse(a.level) : d.cfg->log_level);
        log_set_format((enum log_format)(a.format ? log_format_parse(a.format) : d.cfg->log_format));
        if (d.cfg->startup_timeout_ms)
                d.deadline_ms = log_now_ms() + d.cfg->startup_timeout_ms;
        d.cli_level = a.level;
        shutdown_timeout_s = (d.cfg->shutdown_timeout_ms + 999) / 1000;
        catch_signals();
        log_info("dedupd", "starting: namespace %s, %zu topic(s), config %s", d.cfg->namespace, d.cfg->topic_cnt,
                 a.path);
        if ((rc = start_ops(&d)) == 0 && (rc = prepare(&d)) < 0)
                rc = stop_requested ? 0 : run(&d);
        notify_stopping();
        if (rc == 0)
                log_info("dedupd", "stopped cleanly");
        daemon_free(&d);
        return rc;
}
