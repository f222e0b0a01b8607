/* broker: the loopback broker's registration — `source: loopback` in a test build: an in-memory broker a test fills and reads back (loopback.h), behind the same plug-in as the real ones. */
#include "source/loopback/broker.h"

#include "source/loopback/loopback.h"

/* It has no settings of its own: a `loopback:` key is refused as unknown. */
static const struct field rows[] = {{.name = NULL}};

static const struct config_broker loopback_config = {
        .name = "loopback",
        .title = "the loopback broker",
        .rows = rows,
        .settings_size = 0,
        .test_only = 1,
};

static struct broker_run *open_run(const struct config *cfg) { return (struct broker_run *)loopback_new(cfg); }

static enum broker_probe probe(struct broker_run *r, int left_ms, char *err, size_t errsz)
{
        (void)r, (void)left_ms, (void)err, (void)errsz;
        return BROKER_READY; /* in memory: always there */
}

static int sink(struct broker_run *r, struct sink *out, char *err, size_t errsz)
{
        (void)err, (void)errsz;
        *out = loopback_sink((struct loopback *)r);
        return 0;
}

static struct source *source(struct broker_run *r, struct source_events ev, int64_t deadline_ms, int startup_timeout_ms,
                             char *err, size_t errsz)
{
        (void)deadline_ms, (void)startup_timeout_ms, (void)err, (void)errsz;
        return loopback_source((struct loopback *)r, ev);
}

static void close_run(struct broker_run *r) { loopback_free((struct loopback *)r); }

static enum broker_check check(const struct config *cfg, struct broker_report *rep)
{
        fprintf(rep->out, "loopback: in memory, %zu topic(s)\n", cfg->topic_cnt);
        return BROKER_CHECK_OK;
}

static int lag(struct store *s, const struct config *cfg, FILE *out, int expect_caught_up, broker_finding_fn finding,
               void *opaque, char *err, size_t errsz)
{
        (void)s, (void)cfg, (void)expect_caught_up, (void)finding, (void)opaque, (void)err, (void)errsz;
        fprintf(out, "\nlag: not measured (the loopback broker lives in one process)\n");
        return 0;
}

const struct broker loopback_broker = {
        .config = &loopback_config,
        .awaited = "the loopback broker",
        .open = open_run,
        .probe = probe,
        .sink = sink,
        .source = source,
        .close = close_run,
        .check = check,
        .no_replay = "the loopback broker keeps no log outside its process: push the messages again",
        .lag = lag,
};
