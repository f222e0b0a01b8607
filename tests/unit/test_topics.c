/* test_topics: the broker checks without a broker — what dedupd says when it cannot ask. */
#include <stdio.h>
#include <string.h>

#include "source/kafka/topics.h"
#include "unit.h"

static int warned;
static void count_warn(void *opaque, enum topics_severity sev, const char *file, int line, int col,
                       const char *msg)
{
        (void)opaque;
        assert_int_equal(sev, TOPICS_WARN);
        assert_string_equal(file, "t.yaml");
        assert_int_equal(line, 8); /* the topic's entry */
        assert_int_equal(col, 5);
        assert_contains(msg, "could not ask the broker about topic t and its dead-letter topic t.dlq:");
        assert_contains(msg, "the retention class");
        warned++;
}

/* A broker that does not answer is a warning, not a refusal: nothing can be told. */
static void test_check_unreachable(void **state)
{
        (void)state;
        struct config_errors errs = {0};
        struct config *cfg = config_load_string(
                "t.yaml",
                "namespace: svc\npostgres:\n  conninfo: \"dbname=x\"\nkafka:\n"
                "  bootstrap.servers: 127.0.0.1:1\n  group.id: g\n"
                "topics:\n  - name: t\n    key:\n      subject: \"{json:id}\"\n"
                "      action: PAY\n    handler:\n      path: ./h.so\n    retention: c\n"
                "retention_classes:\n  c:\n    keep: 1h\n",
                &errs);
        char err[256];
        int64_t limit[1] = {42};
        for (size_t i = 0; i < errs.cnt; i++)
                printf("%s\n", errs.msgs[i]);
        assert_non_null(cfg);
        warned = 0;
        assert_int_equal(topics_check(cfg, TOPICS_CHECK_ONLY, 300, count_warn, NULL, limit, err, sizeof(err)), 0);
        assert_int_equal(warned, 1);
        assert_int_equal(limit[0], -1); /* unknown: the producer falls back to its own limit */
        assert_string_equal(err, "");
        config_free(cfg);
        config_errors_clear(&errs);
}

int main(void)
{
        struct unit_list l = {0};
        unit_add(&l, "check: an unreachable broker only warns, once per topic", test_check_unreachable, NULL);
        return unit_run("topics", &l);
}
