/* test_topics: the broker checks without a broker — what dedupd and dedupctl say when none answers. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "source/kafka/topics.h"
#include "unit.h"

static const char yaml[] = "namespace: svc\npostgres:\n  conninfo: \"dbname=x\"\nkafka:\n"
                           "  bootstrap.servers: 127.0.0.1:1\n  group.id: g\n"
                           "topics:\n  - name: t\n    key:\n      subject: \"{json:id}\"\n"
                           "      action: PAY\n    handler:\n      path: ./h.so\n    retention: c\n"
                           "retention_classes:\n  c:\n    keep: 1h\n";

static int reported;
static char report_msg[2048];
static void record(void *opaque, enum topics_severity sev, const char *file, int line, int col, const char *msg)
{
        (void)opaque;
        assert_int_equal(sev, TOPICS_ERROR);
        assert_string_equal(file, "t.yaml");
        assert_int_equal(line, 5); /* bootstrap.servers */
        assert_true(col > 0);
        snprintf(report_msg, sizeof(report_msg), "%s", msg);
        reported++;
}

static struct config *load(void)
{
        struct config_errors errs = {0};
        struct config *cfg = config_load_string("t.yaml", yaml, &errs);
        for (size_t i = 0; i < errs.cnt; i++)
                printf("%s\n", errs.msgs[i]);
        config_errors_clear(&errs);
        assert_non_null(cfg);
        return cfg;
}

/* No broker answers: one error naming bootstrap.servers and why, nothing
 * checked, and no per-topic guesses. */
static void test_check_unreachable(void **state)
{
        (void)state;
        struct config *cfg = load();
        char err[2048];
        int64_t limit[1] = {42};
        reported = 0;
        assert_int_equal(topics_check(cfg, TOPICS_CHECK_ONLY, 300, record, NULL, limit, err, sizeof(err)),
                         TOPICS_UNREACHABLE);
        assert_int_equal(reported, 1);
        assert_contains(report_msg,
                        "cannot reach the Kafka broker(s) at 127.0.0.1:1 (bootstrap.servers) within 300 ms");
        assert_string_equal(err, report_msg);
        assert_int_equal(limit[0], -1); /* unknown: the producer falls back to its own limit */
        config_free(cfg);
}

/* The daemon (no report callback) waits and says so itself: topics_check
 * logs nothing of its own then. */
static void test_daemon_unreachable_not_logged(void **state)
{
        (void)state;
        struct config *cfg = load();
        char path[] = "/tmp/test_topics.XXXXXX", err[2048], buf[4096] = "";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        log_set_fd(fd);
        assert_int_equal(topics_check(cfg, TOPICS_CREATE_MISSING, 300, NULL, NULL, NULL, err, sizeof(err)),
                         TOPICS_UNREACHABLE);
        log_set_fd(2);
        assert_int_equal(pread(fd, buf, sizeof(buf) - 1, 0), 0);
        assert_contains(err, "127.0.0.1:1 (bootstrap.servers)");
        close(fd);
        unlink(path);
        config_free(cfg);
}

int main(void)
{
        struct unit_list l = {0};
        unit_add(&l, "check: an unreachable broker is one error naming bootstrap.servers", test_check_unreachable,
                 NULL);
        unit_add(&l, "check: the daemon's check leaves the logging to the daemon", test_daemon_unreachable_not_logged,
                 NULL);
        return unit_run("topics", &l);
}
