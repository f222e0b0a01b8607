/* test_log_transient: which librdkafka lines a fresh broker's start-up explains, and for how long. */
#include <stdio.h>

#include "source/kafka/log_transient.h"
#include "unit.h"

#define PID_LINE                                                                                                       \
        "[thrd:main]: Failed to acquire idempotence PID from broker 127.0.0.1:24009/1: Broker: Coordinator load in "   \
        "progress: retrying"

struct lt_case {
        const char *name;
        const char *line;
        int64_t ms;
        int transient;
};

static const struct lt_case cases[] = {
        {"at the start", PID_LINE, 0, 1},
        {"within the first minute", PID_LINE, KAFKA_LOG_TRANSIENT_MS - 1, 1},
        {"after the first minute: a broker in trouble", PID_LINE, KAFKA_LOG_TRANSIENT_MS, 0},
        {"before the first client (no start yet)", PID_LINE, -1, 0},
        {"another reason for no PID", "Failed to acquire idempotence PID from broker x: Broker: Not coordinator", 0, 0},
        {"coordinator loading, not the PID", "Coordinator load in progress for group g", 0, 0},
        {"any other warning", "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused", 0,
         0},
};

static void lt_case(void **state)
{
        const struct lt_case *c = *state;
        assert_int_equal(kafka_log_transient(c->line, c->ms), c->transient);
}

int main(void)
{
        struct unit_list l = {0};
        unit_add_table(&l, lt_case, cases);
        return unit_run("log_transient", &l);
}
