/* test_runner_rebalance: the runner's partitions on the loopback and a real PostgreSQL — revocation of buffered messages, starting at the database's position, re-positioning after the database changed, the crash-loop guard, a failed broker, a stop. */
#include "test_runner_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUFFERING                                                                                                      \
        "max_messages: 100, max_wait_ms: 400, adaptive: false" /* a batch waits: what is fetched stays buffered */

static struct loopback_part_state part(const struct rt *t, int32_t p) { return loopback_part(t->lb, "pay", p); }

/* Revoked while buffered: what was buffered is given back, never
 * acknowledged, and nothing of it applied; the partition that stays keeps
 * its buffer. Assigned again, it starts where the broker has it and every
 * message is applied once. */
static int revoke_then_reassign(struct rt *t)
{
        static const int32_t p0[] = {0};
        if (t->step == 0 && part(t, 0).outstanding == 5 && part(t, 1).outstanding == 3) {
                loopback_revoke(t->lb, "pay", p0, 1);
                t->step = 1;
        } else if (t->step == 1 && !part(t, 0).assigned) {
                assert_int_equal(part(t, 0).outstanding, 0);
                assert_int_equal(part(t, 0).released, 5);
                assert_int_equal(part(t, 0).acked, LOOPBACK_NONE);
                assert_int_equal(part(t, 1).outstanding, 3); /* an incremental revocation: p1 stays */
                assert_int_equal(rt_sql_int(t, "SELECT count(*) FROM flaky_effects WHERE idem_key LIKE 'a%'", 0, NULL),
                                 0);
                loopback_assign(t->lb, "pay", p0, 1);
                t->step = 2;
        }
        return t->step == 2 && rt_acked_all(t);
}

static void test_revoke_drops_buffered(void **state)
{
        char *topic = rt_flaky_topic("pay", "", BUFFERING, "");
        struct rt *t = rt_start(topic);
        rt_push(t, "pay", 0, "a0,a1,a2,a3,a4");
        rt_push(t, "pay", 1, "b0,b1,b2");
        rt_assign(t, "pay", 2);
        rt_want_acked(t, "pay", 0, 5);
        rt_want_acked(t, "pay", 1, 3);

        assert_int_equal(rt_run(t, revoke_then_reassign, 10000), 0);

        char *eff = rt_effects(t);
        assert_string_equal(eff, "a0/PAY,a1/PAY,a2/PAY,a3/PAY,a4/PAY,b0/PAY,b1/PAY,b2/PAY");
        assert_int_equal(part(t, 0).handed, 10); /* all five delivered again */
        assert_int_equal(part(t, 0).released, 10);
        assert_int_equal(part(t, 0).started, SOURCE_START_BROKER); /* no database row yet */
        assert_int_equal(rt_db_offset(t, "pay", 0), 5);
        free(eff);
        rt_free(t);
        free(topic);
}

/* A partition the database has a position for starts there, not where the
 * broker has it: the messages before it are never handed over. */
static void test_assign_at_db_position(void **state)
{
        char *topic = rt_flaky_topic("pay", "", "max_messages: 10, max_wait_ms: 20", "");
        struct rt *t = rt_start(topic);
        rt_exec(t, "INSERT INTO dedupd.offsets (namespace, topic, partition, next_offset) VALUES ($1, $2, $3, $4)", 4,
                (const char *const[]){"unit", "pay", "0", "3"});
        rt_push(t, "pay", 0, "m0,m1,m2,m3,m4,m5");
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 6);

        assert_int_equal(rt_run(t, rt_acked_all, 10000), 0);

        assert_int_equal(part(t, 0).started, 3);
        assert_int_equal(part(t, 0).handed, 3);
        char *eff = rt_effects(t);
        assert_string_equal(eff, "m3/PAY,m4/PAY,m5/PAY");
        assert_int_equal(rt_db_offset(t, "pay", 0), 6);
        free(eff);
        rt_free(t);
        free(topic);
}

/* The runner's connection is cut (pg_terminate_backend). */
static void cut_connection(struct rt *t)
{
        char pid[16];
        snprintf(pid, sizeof(pid), "%d", PQbackendPID(store_conn(t->store)));
        free(rt_sql(t, "SELECT pg_terminate_backend($1::int)", 1, (const char *const[]){pid}));
}

/* The database dedupd reconnects to lost the last commits (a promoted
 * replica): every owned partition is moved back to the database's position
 * (seek), and what was lost is applied again. */
static int db_loses_commits(struct rt *t)
{
        if (t->step == 0 && rt_acked_all(t)) {
                rt_exec(t, "UPDATE dedupd.offsets SET next_offset = 2 WHERE namespace = $1", 1,
                        (const char *const[]){"unit"});
                rt_exec(t, "DELETE FROM dedupd.keys WHERE idem_key IN ('m2/PAY', 'm3/PAY', 'm4/PAY')", 0, NULL);
                rt_exec(t, "DELETE FROM flaky_effects WHERE idem_key IN ('m2/PAY', 'm3/PAY', 'm4/PAY')", 0, NULL);
                cut_connection(t);
                rt_push(t, "pay", 0, "m5");
                t->want[0].next_offset = 6;
                t->step = 1;
        }
        return t->step == 1 && rt_acked_all(t);
}

static void test_reposition_after_db_loss(void **state)
{
        char *topic = rt_flaky_topic("pay", "", "max_messages: 10, max_wait_ms: 20", "");
        struct rt *t = rt_start(topic);
        rt_push(t, "pay", 0, "m0,m1,m2,m3,m4");
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 5);

        assert_int_equal(rt_run(t, db_loses_commits, 15000), 0);

        assert_int_equal(part(t, 0).sought, 2);
        assert_true(part(t, 0).seeks >= 1);
        assert_true(part(t, 0).pauses >= 1); /* while the database was away, and until it was positioned */
        assert_false(part(t, 0).paused);
        char *eff = rt_effects(t);
        assert_string_equal(eff, "m0/PAY,m1/PAY,m2/PAY,m3/PAY,m4/PAY,m5/PAY");
        assert_int_equal(rt_db_offset(t, "pay", 0), 6);
        free(eff);
        rt_free(t);
        free(topic);
}

/* Assigned while the database cannot say where the partition starts: it is
 * held (SOURCE_START_LATER), then sought to the database's position once it
 * answers. */
static void test_assign_awaiting_position(void **state)
{
        char *topic = rt_flaky_topic("pay", "", "max_messages: 10, max_wait_ms: 20", "");
        struct rt *t = rt_start(topic);
        rt_exec(t, "INSERT INTO dedupd.offsets (namespace, topic, partition, next_offset) VALUES ($1, $2, $3, $4)", 4,
                (const char *const[]){"unit", "pay", "0", "1"});
        rt_push(t, "pay", 0, "m0,m1,m2");
        cut_connection(t);
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 3);

        assert_int_equal(rt_run(t, rt_acked_all, 15000), 0);

        assert_int_equal(part(t, 0).started, SOURCE_START_LATER);
        assert_int_equal(part(t, 0).sought, 1);
        assert_int_equal(part(t, 0).handed, 2); /* nothing before its position */
        char *eff = rt_effects(t);
        assert_string_equal(eff, "m1/PAY,m2/PAY");
        free(eff);
        rt_free(t);
        free(topic);
}

/* An earlier dedupd crashed in a batch over offsets 0..5, and once more
 * with offset 2 alone: that range runs one message at a time (each
 * acknowledged on its own), offset 2 is dead-lettered as the crash loop, the
 * others apply, and the ledger is empty after. */
static void test_crash_loop_isolation(void **state)
{
        char *topic = rt_flaky_topic("pay", "", "max_messages: 10, max_wait_ms: 20", "max_crashes: 2");
        struct rt *t = rt_start(topic);
        const struct loopback_dead *dead;
        const char *ledger =
                "INSERT INTO dedupd.attempts (namespace, topic, partition, \"offset\", single, until_offset, "
                "attempts, inherited, owner) VALUES ($1, $2, 0, $3, $4, $5, 1, $6, '')";
        rt_exec(t, ledger, 6, (const char *const[]){"unit", "pay", "0", "false", "6", "0"});
        rt_exec(t, ledger, 6, (const char *const[]){"unit", "pay", "2", "true", "3", "1"});
        rt_push(t, "pay", 0, "m0,m1,m2,m3,m4,m5,m6,m7");
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 8);

        assert_int_equal(rt_run(t, rt_acked_all, 10000), 0);

        assert_true(part(t, 0).acks >= 6); /* offsets 0..5 one at a time */
        assert_int_equal(loopback_dead_letters(t->lb, &dead), 1);
        assert_int_equal(dead[0].offset, 2);
        assert_contains(dead[0].reason, "crash loop");
        char *eff = rt_effects(t);
        assert_string_equal(eff, "m0/PAY,m1/PAY,m3/PAY,m4/PAY,m5/PAY,m6/PAY,m7/PAY");
        assert_int_equal(rt_sql_int(t, "SELECT count(*) FROM dedupd.attempts", 0, NULL), 0);
        free(eff);
        rt_free(t);
        free(topic);
}

/* A fatal broker error: the runner stops with it, having acknowledged what
 * committed and closed the consumer. */
static int fails_after_commit(struct rt *t)
{
        if (rt_acked_all(t))
                loopback_set_failure(t->lb, "fenced by a newer member");
        return 0;
}

static void test_source_failure(void **state)
{
        char *topic = rt_flaky_topic("pay", "", "max_messages: 10, max_wait_ms: 20", "");
        struct rt *t = rt_start(topic);
        rt_push(t, "pay", 0, "m0,m1,m2");
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 3);

        assert_int_equal(rt_run(t, fails_after_commit, 10000), -1);

        assert_contains(t->err, "fenced by a newer member");
        assert_true(loopback_closed(t->lb));
        assert_int_equal(part(t, 0).acked, 3);
        assert_int_equal(part(t, 0).outstanding, 0);
        rt_free(t);
        free(topic);
}

/* A stop while messages are buffered: given back, never acknowledged,
 * nothing applied; the next process gets them all. */
static int buffered(struct rt *t) { return part(t, 0).outstanding == 3; }

static void test_stop_with_buffered(void **state)
{
        char *topic = rt_flaky_topic("pay", "", "max_messages: 100, max_wait_ms: 60000, adaptive: false", "");
        struct rt *t = rt_start(topic);
        rt_push(t, "pay", 0, "m0,m1,m2");
        rt_assign(t, "pay", 1);

        assert_int_equal(rt_run(t, buffered, 10000), 0);

        assert_int_equal(part(t, 0).released, 3);
        assert_int_equal(part(t, 0).outstanding, 0);
        assert_int_equal(part(t, 0).acked, LOOPBACK_NONE);
        assert_true(loopback_closed(t->lb));
        char *eff = rt_effects(t);
        assert_string_equal(eff, "");
        free(eff);

        /* A restart: the same broker and database, assigned again. */
        rt_restart(t);
        t->cfg->topics[0].batch_max_wait_ms = 20;
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 3);
        assert_int_equal(rt_run(t, rt_acked_all, 10000), 0);
        eff = rt_effects(t);
        assert_string_equal(eff, "m0/PAY,m1/PAY,m2/PAY");
        free(eff);
        rt_free(t);
        free(topic);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_revoke_drops_buffered),    cmocka_unit_test(test_assign_at_db_position),
                cmocka_unit_test(test_reposition_after_db_loss), cmocka_unit_test(test_assign_awaiting_position),
                cmocka_unit_test(test_crash_loop_isolation),     cmocka_unit_test(test_source_failure),
                cmocka_unit_test(test_stop_with_buffered),
        };
        return rt_main("runner_rebalance", tests, sizeof(tests) / sizeof(tests[0]));
}
