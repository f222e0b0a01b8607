/* test_runner_batches: the runner's batches on the loopback and a real PostgreSQL — committed and acknowledged, duplicates, backoff and dead letters, a stalled batch, a split batch, skipped offsets, the outbox. */
#include "test_runner_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/health.h"

/* A normal run: every message applied once, each partition acknowledged up
 * to its end — and what the broker was told is what dedupd.offsets says. */
static void test_committed_and_acked(void **state)
{
        char *topic = rt_flaky_topic("pay", "", "max_messages: 10, max_wait_ms: 20", "");
        struct rt *t = rt_start(topic);
        for (int i = 0; i < 25; i++) {
                char id[16];
                snprintf(id, sizeof(id), "a%02d", i);
                rt_push(t, "pay", 0, id);
        }
        rt_push(t, "pay", 1, "b0,b1,b2,b3,b4,b5,b6,b7,b8,b9");
        rt_assign(t, "pay", 2);
        rt_want_acked(t, "pay", 0, 25);
        rt_want_acked(t, "pay", 1, 10);

        assert_int_equal(rt_run(t, rt_acked_all, 10000), 0);

        assert_int_equal(rt_sql_int(t, "SELECT count(DISTINCT idem_key) FROM flaky_effects", 0, NULL), 35);
        assert_int_equal(rt_sql_int(t, "SELECT count(*) FROM flaky_effects", 0, NULL), 35);
        assert_int_equal(rt_sql_int(t, "SELECT count(*) FROM dedupd.keys WHERE status = 'DONE'", 0, NULL), 35);
        assert_int_equal(rt_db_offset(t, "pay", 0), loopback_acked(t->lb, "pay", 0));
        assert_int_equal(rt_db_offset(t, "pay", 1), loopback_acked(t->lb, "pay", 1));
        struct loopback_part_state p0 = loopback_part(t->lb, "pay", 0);
        assert_int_equal(p0.handed, 25);
        assert_int_equal(p0.released, 25);
        assert_int_equal(p0.done, 25);
        assert_int_equal(p0.acks_backwards, 0);
        assert_true(p0.acks >= 3); /* batches of 10 at most */
        assert_false(p0.paused);
        assert_true(loopback_closed(t->lb));
        rt_free(t);
        free(topic);
}

/* The same orders again, in the same and in later batches: one debit each;
 * the broker acknowledged everything, the duplicates counted. */
static void test_duplicates_absorbed(void **state)
{
        const char *topic =
                "  - name: pay\n"
                "    key: {subject: \"{json:order_id}\", action: PAY}\n"
                "    handler: {path: \"" TRANSFER_SO "\", config: {seed_accounts: \"3\", initial_balance: \"1000\"}}\n"
                "    batch: {max_messages: 3, max_wait_ms: 20}\n";
        const char *orders[] = {"o1", "o2", "o1", "o3", "o2", "o4", "o1", "o5", "o5"};
        struct rt *t = rt_start(topic);
        for (size_t i = 0; i < sizeof(orders) / sizeof(orders[0]); i++) {
                char v[128];
                snprintf(v, sizeof(v), "{\"order_id\":\"%s\",\"user_id\":1,\"amount\":10}", orders[i]);
                loopback_push(t->lb, "pay", 0, NULL, v, NULL, 0);
        }
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 9);

        assert_int_equal(rt_run(t, rt_acked_all, 10000), 0);

        assert_int_equal(rt_sql_int(t, "SELECT balance FROM account WHERE user_id = 1", 0, NULL), 1000 - 5 * 10);
        assert_int_equal(rt_sql_int(t, "SELECT count(*) FROM transfer_ledger", 0, NULL), 5);
        assert_int_equal(rt_sql_int(t, "SELECT duplicates FROM dedupd.offsets WHERE topic = 'pay'", 0, NULL), 4);
        assert_int_equal(rt_db_offset(t, "pay", 0), 9);
        assert_int_equal(loopback_part(t->lb, "pay", 0).released, 9);
        rt_free(t);
}

/* What the broker carries besides the value — the message key and its
 * headers — reaches the key derivation: {key} and {header:NAME}. */
static void test_key_and_headers(void **state)
{
        const char *topic = "  - name: pay\n"
                            "    key: {subject: \"{key}\", action: \"{header:op}\"}\n"
                            "    handler: {path: \"" FLAKY_SO "\"}\n"
                            "    batch: {max_messages: 10, max_wait_ms: 20}\n";
        struct rt *t = rt_start(topic);
        struct dedupd_header pay[] = {{"op", "PAY", 3}}, refund[] = {{"op", "REFUND", 6}};
        loopback_push(t->lb, "pay", 0, "acct-1", "{}", pay, 1);
        loopback_push(t->lb, "pay", 0, "acct-1", "{}", refund, 1);
        loopback_push(t->lb, "pay", 0, "acct-1", "{}", pay, 1); /* the first again */
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 3);

        assert_int_equal(rt_run(t, rt_acked_all, 10000), 0);

        char *eff = rt_effects(t);
        assert_string_equal(eff, "acct-1/PAY,acct-1/REFUND");
        free(eff);
        rt_free(t);
}

/* Partition workers: each partition's batches on one of two threads and
 * connections. A worker that falls behind has its partitions paused (what
 * it buffers stays bounded) and resumed; every order is applied once, every
 * partition acknowledged to its end, the balances exact. */
static void test_workers(void **state)
{
        const char *topic =
                "  - name: pay\n"
                "    key: {subject: \"{json:order_id}\", action: PAY}\n"
                "    handler: {path: \"" TRANSFER_SO "\", config: {seed_accounts: \"4\", initial_balance: \"1000\"}}\n"
                "    batch: {max_messages: 1, max_wait_ms: 20}\n";
        struct rt *t = rt_start_with("workers: 2\n", topic);
        unsigned pauses = 0, resumes = 0;
        for (int p = 0; p < 4; p++) {
                for (int i = 0; i < 40; i++) {
                        char v[128];
                        snprintf(v, sizeof(v), "{\"order_id\":\"p%d-%d\",\"user_id\":%d,\"amount\":5}", p, i, p + 1);
                        loopback_push(t->lb, "pay", p, NULL, v, NULL, 0);
                }
                rt_want_acked(t, "pay", p, 40);
        }
        rt_assign(t, "pay", 4);

        assert_int_equal(rt_run(t, rt_acked_all, 15000), 0);

        for (int p = 0; p < 4; p++) {
                struct loopback_part_state st = loopback_part(t->lb, "pay", p);
                assert_int_equal(rt_db_offset(t, "pay", p), 40);
                assert_int_equal(st.acks_backwards, 0);
                assert_false(st.paused);
                pauses += st.pauses;
                resumes += st.resumes;
        }
        assert_true(pauses >= 1); /* 16 batches buffered: behind */
        assert_true(resumes >= pauses);
        assert_int_equal(rt_sql_int(t, "SELECT count(*) FROM transfer_ledger", 0, NULL), 160);
        assert_int_equal(rt_sql_int(t, "SELECT count(*) FROM account WHERE balance = 1000 - 40 * 5", 0, NULL), 4);
        rt_free(t);
}

/* RETRY: the batch waits in its backoff with its partition paused, is tried
 * again, and after retry.max_attempts the message is dead-lettered with the
 * reason; its neighbours apply once, one that recovers is applied once, and
 * the partition fetches again. */
static void test_retry_backoff_dead_letter(void **state)
{
        char *topic =
                rt_flaky_topic("pay", "retry_keys: r1/PAY, flap_keys: f1/PAY", "max_messages: 10, max_wait_ms: 20",
                               "max_attempts: 3, backoff_ms: 50, backoff_max_ms: 200");
        struct rt *t = rt_start(topic);
        const struct loopback_dead *dead;
        rt_push(t, "pay", 0, "ok1,r1,f1,ok2");
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 4);
        int64_t t0 = log_now_ms();

        assert_int_equal(rt_run(t, rt_acked_all, 10000), 0);

        char *eff = rt_effects(t);
        assert_string_equal(eff, "f1/PAY,ok1/PAY,ok2/PAY");
        assert_int_equal(loopback_dead_letters(t->lb, &dead), 1);
        assert_string_equal(dead[0].idem_key, "r1/PAY");
        assert_string_equal(dead[0].dlq_topic, "pay.dlq");
        assert_int_equal(dead[0].offset, 1);
        assert_contains(dead[0].reason, "handler returned RETRY 3 times");
        struct loopback_part_state st = loopback_part(t->lb, "pay", 0);
        assert_true(st.pauses >= 1);  /* paused while backing off */
        assert_true(st.resumes >= 1); /* and fetching again */
        assert_false(st.paused);
        assert_true(log_now_ms() - t0 >= 50 + 100); /* two backoffs between three attempts */
        assert_int_equal(rt_db_offset(t, "pay", 0), 4);
        assert_int_equal(rt_sql_int(t, "SELECT dead_lettered FROM dedupd.offsets WHERE topic = 'pay'", 0, NULL), 1);
        free(eff);
        rt_free(t);
        free(topic);
}

/* A dead letter the broker refuses: nothing of the batch is acknowledged
 * (it waits in backoff, paused) until the broker takes it. */
static int refused_then_taken(struct rt *t)
{
        struct loopback_part_state st = loopback_part(t->lb, "pay", 0);
        int64_t now = log_now_ms();
        if (t->step == 0 && st.pauses > 0) {
                t->since_ms = now;
                t->step = 1;
        }
        if (t->step == 1 && now - t->since_ms > 300) {
                assert_int_equal(st.acked, LOOPBACK_NONE); /* nothing acknowledged while it is refused */
                loopback_refuse_dead_letters(t->lb, NULL);
                t->step = 2;
        }
        return t->step == 2 && rt_acked_all(t);
}

static void test_dead_letter_refused(void **state)
{
        char *topic = rt_flaky_topic("pay", "retry_keys: r1/PAY", "max_messages: 10, max_wait_ms: 20",
                                     "max_attempts: 1, backoff_ms: 20, backoff_max_ms: 40");
        struct rt *t = rt_start(topic);
        const struct loopback_dead *dead;
        loopback_refuse_dead_letters(t->lb, "no such topic");
        rt_push(t, "pay", 0, "ok1,r1,ok2");
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 3);

        assert_int_equal(rt_run(t, refused_then_taken, 10000), 0);

        assert_int_equal(loopback_dead_letters(t->lb, &dead), 1);
        assert_string_equal(dead[0].idem_key, "r1/PAY");
        char *eff = rt_effects(t);
        assert_string_equal(eff, "ok1/PAY,ok2/PAY");
        assert_int_equal(loopback_part(t->lb, "pay", 0).acks_backwards, 0);
        free(eff);
        rt_free(t);
        free(topic);
}

/* A topic that keeps failing is reported stuck (readiness says so) while
 * the broker's own state is reported as the source says; both clear. */
static int stuck_then_recovered(struct rt *t)
{
        char why[1024];
        int ready = health_ready(log_now_ms(), why, sizeof(why));
        if (t->step == 0 && !ready && strstr(why, "topic pay is stuck retrying a batch")) {
                loopback_set_connected(t->lb, 0, "link lost");
                t->step = 1;
        } else if (t->step == 1 && strstr(why, "the broker is unreachable: link lost")) {
                loopback_set_connected(t->lb, 1, NULL);
                t->step = 2;
        }
        return t->step == 2 && ready && rt_acked_all(t);
}

static void test_stuck_reported(void **state)
{
        char *topic = rt_flaky_topic("pay", "retry_keys: r1/PAY", "max_messages: 10, max_wait_ms: 20",
                                     "max_attempts: 12, backoff_ms: 10, backoff_max_ms: 40");
        struct rt *t = rt_start(topic);
        const struct loopback_dead *dead;
        rt_push(t, "pay", 0, "r1,ok1");
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 2);

        assert_int_equal(rt_run(t, stuck_then_recovered, 10000), 0);

        assert_int_equal(loopback_dead_letters(t->lb, &dead), 1);
        assert_contains(dead[0].reason, "handler returned RETRY 12 times");
        rt_free(t);
        free(topic);
}

/* A statement that runs past batch.timeout_ms is cancelled by the watchdog:
 * the message's attempt failed, and after retry.max_attempts it is
 * dead-lettered — the test process lives on, the others apply. */
static void test_stalled_batch(void **state)
{
        char *topic = rt_flaky_topic("pay", "slow_sql_keys: s1/PAY, sleep_s: \"5\"",
                                     "max_messages: 10, max_wait_ms: 20, timeout_ms: 200",
                                     "max_attempts: 2, backoff_ms: 20, backoff_max_ms: 40");
        struct rt *t = rt_start(topic);
        const struct loopback_dead *dead;
        rt_push(t, "pay", 0, "ok1,s1,ok2");
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 3);
        int64_t t0 = log_now_ms();

        assert_int_equal(rt_run(t, rt_acked_all, 15000), 0);

        assert_true(log_now_ms() - t0 < 4000); /* cancelled, never slept out its 5 s */
        assert_int_equal(loopback_dead_letters(t->lb, &dead), 1);
        assert_string_equal(dead[0].idem_key, "s1/PAY");
        assert_contains(dead[0].reason, "2 times");
        char *eff = rt_effects(t);
        assert_string_equal(eff, "ok1/PAY,ok2/PAY");
        free(eff);
        rt_free(t);
        free(topic);
}

/* A value one of dedupd's own statements refuses (here a trigger on
 * dedupd.keys) names no message: the batch is halved until the culprit runs
 * alone. What commits on the way is acknowledged at once — a partial commit
 * — and the culprit is dead-lettered with the database's reason. */
static void test_split_partial_commit(void **state)
{
        char *topic = rt_flaky_topic("pay", "", "max_messages: 10, max_wait_ms: 20",
                                     "max_attempts: 2, backoff_ms: 20, backoff_max_ms: 40");
        struct rt *t = rt_start(topic);
        const struct loopback_dead *dead;
        rt_exec(t,
                "CREATE FUNCTION test_refuse_key() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN "
                "IF NEW.idem_key = 'bad/PAY' THEN RAISE EXCEPTION 'test: key % refused', NEW.idem_key; END IF; "
                "RETURN NEW; END $f$",
                0, NULL);
        rt_exec(t,
                "CREATE TRIGGER test_refuse_key BEFORE INSERT ON dedupd.keys FOR EACH ROW "
                "EXECUTE FUNCTION test_refuse_key()",
                0, NULL);
        rt_push(t, "pay", 0, "g0,g1,g2,g3,g4,g5,bad,g7,g8,g9");
        rt_assign(t, "pay", 0 + 1);
        rt_want_acked(t, "pay", 0, 10);

        assert_int_equal(rt_run(t, rt_acked_all, 10000), 0);

        struct loopback_part_state st = loopback_part(t->lb, "pay", 0);
        assert_true(st.acks >= 3); /* the good halves, then the rest */
        assert_int_equal(st.acks_backwards, 0);
        assert_int_equal(loopback_dead_letters(t->lb, &dead), 1);
        assert_string_equal(dead[0].idem_key, "bad/PAY");
        assert_int_equal(dead[0].offset, 6);
        assert_contains(dead[0].reason, "P0001");
        char *eff = rt_effects(t);
        assert_string_equal(eff, "g0/PAY,g1/PAY,g2/PAY,g3/PAY,g4/PAY,g5/PAY,g7/PAY,g8/PAY,g9/PAY");
        assert_int_equal(rt_db_offset(t, "pay", 0), 10);
        assert_int_equal(rt_sql_int(t, "SELECT count(*) FROM dedupd.attempts", 0, NULL),
                         0); /* the split start forgotten */
        free(eff);
        rt_free(t);
        free(topic);
}

/* Offsets that hold no message (a transaction's markers) after the last
 * message: recorded in dedupd.offsets, then acknowledged — lag reaches 0. */
static void test_skipped_range(void **state)
{
        char *topic = rt_flaky_topic("pay", "", "max_messages: 10, max_wait_ms: 20", "");
        struct rt *t = rt_start(topic);
        rt_push(t, "pay", 0, "m0,m1");
        loopback_gap(t->lb, "pay", 0, 2);
        rt_push(t, "pay", 0, "m4");
        loopback_gap(t->lb, "pay", 0, 5);
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 10);

        assert_int_equal(rt_run(t, rt_acked_all, 10000), 0);

        assert_int_equal(rt_db_offset(t, "pay", 0), 10);
        char *eff = rt_effects(t);
        assert_string_equal(eff, "m0/PAY,m1/PAY,m4/PAY");
        assert_int_equal(loopback_part(t->lb, "pay", 0).handed, 3);
        free(eff);
        rt_free(t);
        free(topic);
}

/* What a handler emits goes through the outbox: committed with the effect,
 * then published through the sink; a broker that does not answer leaves the
 * rows unsent, and they go out once it does. */
static int published_after_outage(struct rt *t)
{
        int64_t unsent = rt_sql_int(t, "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL", 0, NULL);
        if (t->step == 0 && rt_acked_all(t) && unsent == 3) {
                loopback_publish_fate(t->lb, SINK_ACKED, NULL);
                t->step = 1;
        }
        return t->step == 1 && unsent == 0;
}

static void test_outbox_relay(void **state)
{
        char *topic = rt_flaky_topic("pay", "emit_topic: events", "max_messages: 10, max_wait_ms: 20", "");
        struct rt *t = rt_start(topic);
        const struct loopback_pub *pubs;
        loopback_publish_fate(t->lb, SINK_UNSENT, "the broker did not answer");
        rt_push(t, "pay", 0, "e1,e2,e3");
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 3);

        assert_int_equal(rt_run(t, published_after_outage, 15000), 0);

        size_t n = loopback_published(t->lb, &pubs), acked = 0;
        for (size_t i = 0; i < n; i++)
                if (pubs[i].fate == SINK_ACKED) {
                        assert_string_equal(pubs[i].topic, "events");
                        assert_contains(pubs[i].value, "\"id\":\"e");
                        acked++;
                }
        assert_int_equal(acked, 3);
        assert_true(n > acked); /* tried while the broker was away */
        rt_free(t);
        free(topic);
}

/* Past limits.outbox_backlog unsent rows every partition pauses, whatever
 * its topic's own state; once the relay publishes below it they fetch again. */
static int backlog_paused_then_drained(struct rt *t)
{
        struct loopback_part_state st = loopback_part(t->lb, "pay", 0);
        if (t->step == 0 && st.paused &&
            rt_sql_int(t, "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL", 0, NULL) >= 2) {
                assert_true(st.handed < 100); /* it stopped fetching */
                loopback_publish_fate(t->lb, SINK_ACKED, NULL);
                t->step = 1;
        }
        return t->step == 1 && rt_acked_all(t) && !st.paused &&
               rt_sql_int(t, "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL", 0, NULL) == 0;
}

static void test_outbox_backlog_pauses(void **state)
{
        char *topic =
                rt_flaky_topic("pay", "emit_topic: events", "max_messages: 1, max_wait_ms: 10, adaptive: false", "");
        struct rt *t =
                rt_start_with("limits: {outbox_backlog: 2}\noutbox: {interval_ms: 20, retry_backoff_ms: 20}\n", topic);
        const struct loopback_pub *pubs;
        loopback_publish_fate(t->lb, SINK_UNSENT, "the broker did not answer");
        for (int i = 0; i < 100; i++) {
                char id[16];
                snprintf(id, sizeof(id), "e%02d", i);
                rt_push(t, "pay", 0, id);
        }
        rt_assign(t, "pay", 1);
        rt_want_acked(t, "pay", 0, 100);

        assert_int_equal(rt_run(t, backlog_paused_then_drained, 15000), 0);

        assert_true(loopback_part(t->lb, "pay", 0).resumes >= 1);
        size_t n = loopback_published(t->lb, &pubs), acked = 0;
        for (size_t i = 0; i < n; i++)
                acked += pubs[i].fate == SINK_ACKED;
        assert_int_equal(acked, 100); /* the backlog, then the rest as they commit */
        assert_int_equal(rt_sql_int(t, "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL", 0, NULL), 0);
        rt_free(t);
        free(topic);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_committed_and_acked),
                cmocka_unit_test(test_duplicates_absorbed),
                cmocka_unit_test(test_key_and_headers),
                cmocka_unit_test(test_workers),
                cmocka_unit_test(test_retry_backoff_dead_letter),
                cmocka_unit_test(test_dead_letter_refused),
                cmocka_unit_test(test_stuck_reported),
                cmocka_unit_test(test_stalled_batch),
                cmocka_unit_test(test_split_partial_commit),
                cmocka_unit_test(test_skipped_range),
                cmocka_unit_test(test_outbox_relay),
                cmocka_unit_test(test_outbox_backlog_pauses),
        };
        return rt_main("runner_batches", tests, sizeof(tests) / sizeof(tests[0]));
}
