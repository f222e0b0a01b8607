/* test_metrics: the exposition text a Prometheus parses — names, labels and their escaping, histograms — and librdkafka's statistics read into lag. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/metrics.h"
#include "ops/registry.h"
#include "source/kafka/stats.h"
#include "unit.h"

static const struct metric_def counter_def = {
        .name = "t_events_total", .help = "Events, by kind", .type = METRIC_COUNTER, .labels = {"kind", "where"}};
static const struct metric_def hist_def = {.name = "t_duration_seconds",
                                           .help = "How long",
                                           .type = METRIC_HISTOGRAM,
                                           .labels = {"topic"},
                                           .buckets = {0.1, 1, 10},
                                           .nbuckets = 3};
static const struct metric_def gauge_def = {
        .name = "t_backlog", .help = "Help with a \\ and a\nnewline", .type = METRIC_GAUGE};

static void test_counter_labels_escaped(void **state)
{
        (void)state;
        struct registry *r = registry_new();
        struct metric *m = registry_add(r, &counter_def);
        metric_inc(m, (const char *const[]){"a", "x"}, 2);
        metric_inc(m, (const char *const[]){"a", "x"}, 3);
        metric_inc(m, (const char *const[]){"quote\"back\\slash\nnl", "y"}, 1);
        char *text = registry_render(r);
        assert_contains(text, "# HELP t_events_total Events, by kind\n# TYPE t_events_total counter\n");
        assert_contains(text, "t_events_total{kind=\"a\",where=\"x\"} 5\n");
        assert_contains(text, "t_events_total{kind=\"quote\\\"back\\\\slash\\nnl\",where=\"y\"} 1\n");
        free(text);
        registry_free(r);
}

static void test_histogram_cumulative(void **state)
{
        (void)state;
        struct registry *r = registry_new();
        struct metric *m = registry_add(r, &hist_def);
        const double obs[] = {0.05, 0.1, 0.5, 2, 20, 30};
        for (size_t i = 0; i < sizeof(obs) / sizeof(*obs); i++)
                metric_observe(m, (const char *const[]){"p"}, obs[i]);
        char *text = registry_render(r);
        /* le is inclusive: 0.1 falls in the 0.1 bucket */
        assert_contains(text, "t_duration_seconds_bucket{topic=\"p\",le=\"0.1\"} 2\n");
        assert_contains(text, "t_duration_seconds_bucket{topic=\"p\",le=\"1\"} 3\n");
        assert_contains(text, "t_duration_seconds_bucket{topic=\"p\",le=\"10\"} 4\n");
        assert_contains(text, "t_duration_seconds_bucket{topic=\"p\",le=\"+Inf\"} 6\n");
        assert_contains(text, "t_duration_seconds_sum{topic=\"p\"} 52.65\n");
        assert_contains(text, "t_duration_seconds_count{topic=\"p\"} 6\n");
        free(text);
        registry_free(r);
}

static void test_gauge_set_forget_help(void **state)
{
        (void)state;
        struct registry *r = registry_new();
        struct metric *m = registry_add(r, &gauge_def);
        metric_set(m, NULL, 7);
        metric_set(m, NULL, 4);
        char *text = registry_render(r);
        assert_contains(text, "# HELP t_backlog Help with a \\\\ and a\\nnewline\n");
        assert_contains(text, "t_backlog 4\n");
        free(text);
        metric_forget(m, NULL);
        text = registry_render(r);
        assert_null(strstr(text, "t_backlog 4"));
        free(text);
        registry_free(r);
}

static void test_stats_lag(void **state)
{
        (void)state;
        static const char stats[] =
                "{\"name\":\"rdkafka#consumer-1\",\"topics\":{\"payments\":{\"topic\":\"payments\",\"partitions\":{"
                "\"0\":{\"partition\":0,\"consumer_lag\":12},"
                "\"1\":{\"partition\":1,\"consumer_lag\":-1},"
                "\"-1\":{\"partition\":-1,\"consumer_lag\":99}}}}}";
        metrics_init();
        assert_int_equal(kafka_stats_apply(stats, strlen(stats)), 0);
        char *text = metrics_render();
        assert_contains(text, "dedupd_consumer_lag{topic=\"payments\",partition=\"0\"} 12\n");
        assert_null(strstr(text, "partition=\"1\""));  /* not known yet */
        assert_null(strstr(text, "partition=\"-1\"")); /* librdkafka's internal one */
        free(text);
        metrics_lag("payments", 0, -1); /* revoked */
        text = metrics_render();
        assert_null(strstr(text, "dedupd_consumer_lag{"));
        free(text);
        assert_int_equal(kafka_stats_apply("not json", 8), -1);
        metrics_free();
}

/* Whether a broker is back: librdkafka's internal broker never counts. */
static void test_stats_brokers_up(void **state)
{
        (void)state;
        static const char down[] = "{\"brokers\":{\"h:9092/bootstrap\":{\"source\":\"configured\",\"state\":\"DOWN\"},"
                                   "\"GroupCoordinator\":{\"source\":\"logical\",\"state\":\"CONNECT\"},"
                                   "\":0/internal\":{\"source\":\"internal\",\"state\":\"UP\"}}}";
        static const char up[] = "{\"brokers\":{\"h:9092/1\":{\"source\":\"learned\",\"state\":\"UP\"},"
                                 "\"h:9092/bootstrap\":{\"source\":\"configured\",\"state\":\"INIT\"}}}";
        assert_int_equal(kafka_stats_brokers_up(down, strlen(down)), 0);
        assert_int_equal(kafka_stats_brokers_up(up, strlen(up)), 1);
        assert_int_equal(kafka_stats_brokers_up("{}", 2), 0);
        assert_int_equal(kafka_stats_brokers_up("not json", 8), -1);
}

static void test_dedupd_families_exist(void **state)
{
        (void)state;
        metrics_init();
        metrics_topic("payments");
        metrics_db_error("40P01");
        metrics_db_error(NULL);
        char *text = metrics_render();
        assert_contains(text, "dedupd_messages_total{topic=\"payments\",outcome=\"applied\"} 0\n");
        assert_contains(text, "dedupd_messages_total{topic=\"payments\",outcome=\"dead_lettered\"} 0\n");
        assert_contains(text, "dedupd_db_errors_total{class=\"40\"} 1\n");
        assert_contains(text, "dedupd_db_errors_total{class=\"none\"} 1\n");
        assert_contains(text, "dedupd_outbox_backlog 0\n");
        assert_contains(text, "# TYPE dedupd_batch_duration_seconds histogram\n");
        free(text);
        metrics_free();
        assert_null(metrics_render()); /* and every update a no-op */
        metrics_messages("payments", "applied", 3);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_counter_labels_escaped), cmocka_unit_test(test_histogram_cumulative),
                cmocka_unit_test(test_gauge_set_forget_help),  cmocka_unit_test(test_stats_lag),
                cmocka_unit_test(test_stats_brokers_up),       cmocka_unit_test(test_dedupd_families_exist),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
