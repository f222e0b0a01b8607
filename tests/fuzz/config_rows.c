/* config_rows: configs generated from the config table's own rows, loaded (and reloaded), their invariants checked row by row, then the whole dedupctl check run — broker and database asked at a closed loopback port. */
#include "fuzz.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/config.h"
#include "base/config_impl.h"
#include "base/log.h"
#include "config_gen.h"
#include "source/kafka/settings.h"
#include "source/nats/settings.h"
#include "source/rabbitmq/settings.h"
#include "tools/check.h"

#ifndef FUZZ_HANDLER
#error "FUZZ_HANDLER (a handler shared object) must be defined by the build"
#endif

/* The first input byte says what else this input runs (the generator reads the others). The
 * broker's and the database's side of check costs ~3 ms (a Kafka client made and destroyed),
 * forty times the rest: one input in eight asks them, so a minute still runs ~10^5 configs. */
#define RUN_ONLINE(b) (((b)&7) == 1) /* the broker's and the database's side of check */
#define RUN_RELOAD(b) ((b)&8)        /* SIGHUP: the text read again over a running config */

static struct gen_env env;
static FILE *sink;
static struct config *live; /* what a SIGHUP reloads over */
static char reload_path[64];

/* A port on 127.0.0.1 bound and never listened on: every connection to it is refused at
 * once, by the kernel, and nothing else can take the port while the fuzzer runs. */
static int closed_port(void)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) || getsockname(s, (struct sockaddr *)&a, &len)) {
                perror("fuzz config_rows: a closed port");
                abort();
        }
        return ntohs(a.sin_port);
}

static void setup(void)
{
        static char kafka[64], conninfo[160], nats_url[64], amqp_url[96];
        static char big[100001];
        int port = closed_port();
        snprintf(kafka, sizeof(kafka), "127.0.0.1:%d", port);
        snprintf(conninfo, sizeof(conninfo), "host=127.0.0.1 port=%d dbname=x user=u connect_timeout=1", port);
        snprintf(nats_url, sizeof(nats_url), "nats://127.0.0.1:%d", port);
        snprintf(amqp_url, sizeof(amqp_url), "amqp://u:p@127.0.0.1:%d/v", port);
        env = (struct gen_env){kafka, conninfo, nats_url, amqp_url, FUZZ_HANDLER, 0};
        /* Held for the whole run: the handler is instrumented, and libFuzzer cannot take its
         * counters being unmapped by the dlclose of every check. */
        if (!dlopen(FUZZ_HANDLER, RTLD_NOW | RTLD_LOCAL)) {
                fprintf(stderr, "fuzz config_rows: %s\n", dlerror());
                abort();
        }
        memset(big, 'y', sizeof(big) - 1);
        setenv("DEDUPD_FUZZ_LONG", big, 1);
        setenv("DEDUPD_FUZZ_EMPTY", "", 1);
        setenv("DEDUPD_FUZZ_SET", "5", 1);
        unsetenv("DEDUPD_FUZZ_UNSET");
        sink = fopen("/dev/null", "w");
        log_set_level(LOG_ERROR);
        log_set_fd(fileno(sink));
        snprintf(reload_path, sizeof(reload_path), "/tmp/fuzz_config_rows.%d.yaml", (int)getpid());
}

/* What a loaded config promises, row by row: a string row is set unless optional, and "" only
 * where the row gives "" a meaning; numbers within bounds; enums one of their names. */
static const struct config *cfg_held; /* the config rows_hold looks at */

static void rows_hold(const struct field *rows, const void *base, const char *what)
{
        for (const struct field *f = rows; f->name; f++) {
                const void *slot = (const char *)base + f->off;
                int n = 0;
                switch (f->type) {
                case F_STR: {
                        const char *s = *(char *const *)slot;
                        FUZZ_ASSERT(s || !f->required, "%s%s is required, and loaded unset", what, f->name);
                        FUZZ_ASSERT(!s || *s || config_field_empty_ok(f), "%s%s loaded as \"\"", what, f->name);
                        break;
                }
                case F_INT:
                        FUZZ_ASSERT(*(const int *)slot >= f->min && *(const int *)slot <= f->max,
                                    "%s%s = %d, outside [%ld, %ld]", what, f->name, *(const int *)slot, f->min, f->max);
                        break;
                case F_DURATION:
                        FUZZ_ASSERT(*(const int64_t *)slot >= f->min, "%s%s below %ld ms", what, f->name, f->min);
                        break;
                case F_BOOL:
                        FUZZ_ASSERT(*(const int *)slot == 0 || *(const int *)slot == 1, "%s%s", what, f->name);
                        break;
                case F_ENUM:
                        while (f->names[n].name && f->names[n].value != *(const int *)slot)
                                n++;
                        FUZZ_ASSERT(f->names[n].name, "%s%s = %d, none of its names", what, f->name,
                                    *(const int *)slot);
                        break;
                case F_SECTION: rows_hold(f->sub, base, what); break;
                case F_OWN: /* a broker's own row, on its settings */
                        rows_hold((const struct field[]){*f->sub, {.name = NULL}}, cfg_held->broker_settings[f->off],
                                  what);
                        break;
                default: break;
                }
        }
}

static void config_holds(const struct config *cfg)
{
        int bootstrap = 0, group = 0;
        cfg_held = cfg;
        rows_hold(config_rows(), cfg, "");
        FUZZ_ASSERT(cfg->topic_cnt >= 1, "loaded without a topic");
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                rows_hold(config_topic_fields, &cfg->topics[i], "topics[].");
                FUZZ_ASSERT(cfg->topics[i].keyspec, "topic %zu loaded without a compiled key", i);
        }
        for (size_t i = 0; i < cfg->class_cnt; i++)
                rows_hold(config_class_fields, &cfg->classes[i], "retention_classes.*.");
        const struct config_kvs *kafka = kafka_props(cfg);
        for (size_t i = 0; i < kafka->n; i++) {
                bootstrap |= !strcmp(kafka->v[i].name, "bootstrap.servers") && *kafka->v[i].value;
                group |= !strcmp(kafka->v[i].name, "group.id") && *kafka->v[i].value;
        }
        FUZZ_ASSERT(strcmp(config_source_name(cfg), "kafka") || (bootstrap && group),
                    "kafka loaded without its servers or group");
}

static void errors_located(const struct config_errors *errs, const char *file)
{
        size_t fl = strlen(file);
        FUZZ_ASSERT(errs->cnt > 0, "refused without a message");
        for (size_t i = 0; i < errs->cnt; i++) {
                int line = 0, col = 0;
                const char *m = errs->msgs[i];
                FUZZ_ASSERT(!strncmp(m, file, fl) && sscanf(m + fl, ":%d:%d: ", &line, &col) == 2 && line >= 1 &&
                                    col >= 1,
                            "message without file:line:column: %s", m);
        }
}

/* Only the fuzzer's own closed port may be asked: nothing resolves a name, nothing leaves. */
static int endpoints_local(const struct config *cfg)
{
        int ok = gen_env_endpoint(&env, cfg->pg_conninfo), servers = 0;
        const struct config_kvs *kafka = kafka_props(cfg);
        const char *source = config_source_name(cfg);
        for (size_t i = 0; i < kafka->n; i++)
                if (!strcmp(kafka->v[i].name, "bootstrap.servers") ||
                    !strcmp(kafka->v[i].name, "metadata.broker.list")) {
                        ok &= gen_env_endpoint(&env, kafka->v[i].value);
                        servers++;
                }
        if (!strcmp(source, "kafka"))
                return ok && servers;
        if (!strcmp(source, "nats"))
                return ok && gen_env_endpoint(&env, nats_conf(cfg)->url);
        return ok && gen_env_endpoint(&env, rmq_conf(cfg)->url);
}

static void reload(const char *yaml)
{
        struct config_errors errs = {0};
        char applied[1024], restart[1024];
        FILE *fp = fopen(reload_path, "w");
        FUZZ_ASSERT(fp, "cannot write %s", reload_path);
        fputs(yaml, fp);
        fclose(fp);
        if (config_reload(live, reload_path, &errs, applied, sizeof(applied), restart, sizeof(restart)) == 0)
                FUZZ_ASSERT(errs.cnt == 0, "reloaded with %zu errors", errs.cnt);
        else
                errors_located(&errs, reload_path);
        config_holds(live); /* a reload, refused or not, leaves a config that holds */
        config_errors_clear(&errs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct config_errors errs = {0};
        unsigned run = size ? data[0] : 0;
        int source;

        if (!sink) {
                setup();
                char *base = gen_config(NULL, 0, &env, &source);
                live = config_load_string("live.yaml", base, &errs);
                FUZZ_ASSERT(live, "the baseline config does not load: %s\n%s", errs.cnt ? errs.msgs[0] : "?", base);
                free(base);
        }
        /* What a reproducer's bytes make, and what became of it: replay it with this set
         * (FUZZ_PRINT_CONFIG=rows: with each row's number, which moves the lines). */
        FILE *talk = getenv("FUZZ_PRINT_CONFIG") ? stderr : sink;
        env.number_rows = talk != sink && !strcmp(getenv("FUZZ_PRINT_CONFIG"), "rows");
        char *yaml = gen_config(data + !!size, size ? size - 1 : 0, &env, &source);
        if (talk != sink)
                fprintf(talk, "---- fuzz.yaml (online %d, reload %d)\n%s----\n", RUN_ONLINE(run), !!RUN_RELOAD(run),
                        yaml);
        struct config *cfg = config_load_string("fuzz.yaml", yaml, &errs);
        for (size_t i = 0; i < errs.cnt; i++)
                fprintf(talk, "%s\n", errs.msgs[i]);
        if (!cfg)
                errors_located(&errs, "fuzz.yaml");
        else {
                FUZZ_ASSERT(errs.cnt == 0, "loaded with %zu errors", errs.cnt);
                config_holds(cfg);
                struct check_opts o = {.offline = !(RUN_ONLINE(run)) || !endpoints_local(cfg),
                                       .print = talk == sink,
                                       .broker_timeout_ms = 1,
                                       .out = talk,
                                       .err = talk};
                enum check_rc rc = check_run(cfg, &o);
                fprintf(talk, "check: %d%s\n", (int)rc, o.offline ? " (offline)" : "");
                FUZZ_ASSERT(rc == CHECK_OK || rc == CHECK_INVALID || rc == CHECK_UNREACHABLE, "check returned %d",
                            (int)rc);
                FUZZ_ASSERT(o.offline || rc == CHECK_UNREACHABLE, "the closed port answered");
                config_free(cfg);
        }
        if (RUN_RELOAD(run))
                reload(yaml);
        config_errors_clear(&errs);
        free(yaml);
        return 0;
}
