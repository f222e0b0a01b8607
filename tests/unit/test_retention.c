/* test_retention: how long keys live — the seed's storage arithmetic, the
 * rate an operator types, and a class shorter than its topic's retention. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/retention.h"
#include "tools/plan.h"
#include "unit.h"

#define DAY 86400000LL
#define HOUR 3600000LL

/* The seed: 10,000 QPS for 48 h = 172,800 s -> 1.728 billion rows; 100 B a
 * row -> about 173 GB. */
static void test_plan_seed(void **state)
{
        (void)state;
        uint64_t rows = 0, bytes = 0;
        char h[32];
        assert_int_equal(plan_class(10000, 48 * HOUR, PLAN_DEFAULT_ROW_BYTES, &rows, &bytes), 0);
        assert_true(rows == 1728000000ULL);
        assert_true(bytes == 172800000000ULL);
        assert_string_equal(plan_human_count(rows, h, sizeof(h)), "1.73 billion");
        assert_string_equal(plan_human_bytes(bytes, h, sizeof(h)), "173 GB");
}

struct plan_case {
        const char *name;
        double rate;
        int64_t keep_ms;
        double row_bytes;
        int rc;
        uint64_t rows, bytes;
};

static const struct plan_case plan_cases[] = {
        {"plan: the seed's 'payments 7-30 days' at 10000/s for 7d", 10000, 7 * DAY, 100, 0, 6048000000ULL,
         604800000000ULL},
        {"plan: the seed's 'tracking 10 minutes'", 10000, 600000, 100, 0, 6000000, 600000000},
        {"plan: a measured row size that is not whole", 1, 3000, 187.5, 0, 3, 563},
        {"plan: a rate per minute (100/min for 1h)", 100.0 / 60, HOUR, 100, 0, 6000, 600000},
        {"plan: nothing kept", 10000, 0, 100, 0, 0, 0},
        {"plan: negative rate refused", -1, HOUR, 100, -1, 0, 0},
        {"plan: negative keep refused", 1, -1, 100, -1, 0, 0},
        {"plan: overflow refused", 1e18, 365 * DAY, 100, -1, 0, 0},
};

static void test_plan_case(void **state)
{
        const struct plan_case *c = *state;
        uint64_t rows = 0, bytes = 0;
        assert_int_equal(plan_class(c->rate, c->keep_ms, c->row_bytes, &rows, &bytes), c->rc);
        if (c->rc == 0) {
                assert_true(rows == c->rows);
                assert_true(bytes == c->bytes);
        }
}

struct rate_case {
        const char *name;
        const char *text;
        int rc;
        double per_s;
};

static const struct rate_case rate_cases[] = {
        {"rate: 10000/s", "10000/s", 0, 10000},
        {"rate: a plain number is per second", "10000", 0, 10000},
        {"rate: per minute", "600000/min", 0, 10000},
        {"rate: per hour", "36000000/h", 0, 10000},
        {"rate: fractional", "2.5/s", 0, 2.5},
        {"rate: empty", "", -1, 0},
        {"rate: not a number", "fast", -1, 0},
        {"rate: unknown unit", "10/d", -1, 0},
        {"rate: negative", "-5/s", -1, 0},
        {"rate: zero", "0", -1, 0},
        {"rate: trailing junk", "10000/s/", -1, 0},
        {"rate: space before the unit", "10000 /s", -1, 0},
        {"rate: infinite", "1e400/s", -1, 0},
};

static void test_rate_case(void **state)
{
        const struct rate_case *c = *state;
        double v = -1;
        char err[256] = "";
        assert_int_equal(plan_parse_rate(c->text, &v, err, sizeof(err)), c->rc);
        if (c->rc == 0) {
                assert_true(v > c->per_s - 1e-9 && v < c->per_s + 1e-9);
        } else {
                assert_contains(err, "--rate '");
                assert_contains(err, "10000/s, 600000/min, 36000000/h");
        }
}

struct human_case {
        const char *name;
        uint64_t n;
        const char *count, *bytes;
};

static const struct human_case human_cases[] = {
        {"human: 0", 0, "0", "0 B"},
        {"human: 999", 999, "999", "999 B"},
        {"human: 1000", 1000, "1.00 thousand", "1.00 kB"},
        {"human: 1500", 1500, "1.50 thousand", "1.50 kB"},
        {"human: 864 million (a day at 10000/s)", 864000000, "864 million", "864 MB"},
        {"human: rounding up to the next unit", 999999999, "1.00 billion", "1.00 GB"},
        {"human: 17.3", 17300000000ULL, "17.3 billion", "17.3 GB"},
};

static void test_human_case(void **state)
{
        const struct human_case *c = *state;
        char h[32];
        assert_string_equal(plan_human_count(c->n, h, sizeof(h)), c->count);
        assert_string_equal(plan_human_bytes(c->n, h, sizeof(h)), c->bytes);
}

struct compare_case {
        const char *name;
        int64_t keep_ms;
        int allow;
        int64_t retention_ms;
        const char *policy;
        const char *want; /* NULL: accepted; otherwise a phrase (or the whole message) */
        int exact;
        const char *kind, *setting; /* NULL: a Kafka topic, retention.ms=<retention_ms> */
};

static const struct compare_case compare_cases[] = {
        {"compare: 1d under a 7d topic (the whole message)", DAY, 0, 7 * DAY, "delete",
         "topic payments: retention class 'notify' keeps keys 1d but the topic retains messages for "
         "7d (retention.ms=604800000): a message still in the topic could be replayed after its key "
         "was purged — 6d too short; set keep >= 7d or allow_shorter_than_topic: true",
         1, NULL, NULL},
        {"compare: 1d under 7d, allowed", DAY, 1, 7 * DAY, "delete", NULL, 0, NULL, NULL},
        {"compare: equal is enough", 7 * DAY, 0, 7 * DAY, "delete", NULL, 0, NULL, NULL},
        {"compare: longer is fine", 30 * DAY, 0, 7 * DAY, NULL, NULL, 0, NULL, NULL},
        {"compare: short by hours and minutes", 2 * DAY, 0, 2 * DAY + 90 * 60000, "delete",
         "1h 30m too short; set keep >= 2d 1h 30m", 0, NULL, NULL},
        {"compare: an infinite topic", 30 * DAY, 0, -1, "delete", "retains messages for ever (retention.ms=-1)", 0,
         NULL, NULL},
        {"compare: an infinite topic, allowed", 30 * DAY, 1, -1, "delete", NULL, 0, NULL, NULL},
        {"compare: a compacted topic keeps messages for ever", 30 * DAY, 0, 7 * DAY, "compact",
         "compacted (cleanup.policy=compact)", 0, NULL, NULL},
        {"compare: compact,delete honours retention.ms", 7 * DAY, 0, 7 * DAY, "compact,delete", NULL, 0, NULL, NULL},
        {"compare: a stream, in its own words (the whole message)", 30 * 60000, 0, 3600000, NULL,
         "stream payments: retention class 'notify' keeps keys 30m but the stream retains messages for "
         "1h (max_age 1h): a message still in the stream could be replayed after its key was purged — "
         "30m too short; set keep >= 1h or allow_shorter_than_topic: true",
         1, "stream", "max_age 1h"},
        {"compare: a queue without a TTL keeps messages for ever", DAY, 0, -1, NULL,
         "queue payments: retention class 'notify' keeps keys 1d but the queue retains messages for ever "
         "(no message TTL)",
         0, "queue", "no message TTL"},
};

static void test_compare_case(void **state)
{
        const struct compare_case *c = *state;
        struct retention_class rc = {.name = "notify", .keep_ms = c->keep_ms, .allow_shorter_than_topic = c->allow};
        char msg[1024] = "", setting[64];
        snprintf(setting, sizeof(setting), "retention.ms=%" PRId64, c->retention_ms);
        struct retention_holder h = {c->kind ? c->kind : "topic", "payments", c->setting ? c->setting : setting};
        int got = retention_compare(&h, &rc, c->retention_ms, c->policy, msg, sizeof(msg));
        if (!c->want) {
                if (got)
                        fail_msg("refused: %s", msg);
                return;
        }
        assert_int_equal(got, -1);
        if (c->exact)
                assert_string_equal(msg, c->want);
        else
                assert_contains(msg, c->want);
}

#define Y_BASE                                                                                                         \
        "namespace: svc\npostgres:\n  conninfo: \"dbname=x\"\nkafka:\n"                                                \
        "  bootstrap.servers: localhost:9092\n  group.id: g\n"                                                         \
        "topics:\n  - name: t\n    key:\n      subject: \"{json:id}\"\n"                                               \
        "      action: PAY\n    handler:\n      path: ./h.so\n"

/* progress_log lives as long as the longest class keeps keys, 30 days without one. */
static void test_progress_keep(void **state)
{
        (void)state;
        struct config_errors errs = {0};
        struct config *cfg = config_load_string("t.yaml", Y_BASE, &errs);
        assert_non_null(cfg);
        assert_true(retention_progress_keep_ms(cfg) == 30 * DAY);
        config_free(cfg);
        cfg = config_load_string("t.yaml",
                                 Y_BASE "    retention: short\nretention_classes:\n"
                                        "  short: {keep: 1h}\n  long: {keep: 9d}\n",
                                 &errs);
        for (size_t i = 0; i < errs.cnt; i++)
                printf("%s\n", errs.msgs[i]);
        assert_non_null(cfg);
        assert_true(retention_progress_keep_ms(cfg) == 9 * DAY);
        config_free(cfg);
        config_errors_clear(&errs);
}

int main(void)
{
        struct unit_list l = {0};
        unit_add(&l, "plan: the seed's 10000/s for 48h at 100 B = 1.73 billion rows, 173 GB", test_plan_seed, NULL);
        unit_add_table(&l, test_plan_case, plan_cases);
        unit_add_table(&l, test_rate_case, rate_cases);
        unit_add_table(&l, test_human_case, human_cases);
        unit_add_table(&l, test_compare_case, compare_cases);
        unit_add(&l, "progress_log keep", test_progress_keep, NULL);
        return unit_run("retention", &l);
}
