/* test_split: a batch that fails without a message named is halved until the message runs alone, whose failures then count toward retry.max_attempts; whole batches come back once the failed one has committed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/batch.h"
#include "core/split.h"
#include "unit.h"

struct fixture {
        struct pl_msg msgs[100];
        struct pl_entry ents[100]; /* each message beside its state, as the runner holds them */
        struct pl_entry *ptrs[100];
        struct topic_conf t;
        struct pl_topic pt;
        struct split s;
};

static void fixture(struct fixture *f)
{
        memset(f, 0, sizeof(*f));
        f->t.name = "pay";
        f->t.retry_max_attempts = 3;
        f->pt.t = &f->t;
        snprintf(f->pt.ctx, sizeof(f->pt.ctx), "topic:pay");
        for (int i = 0; i < 100; i++) {
                f->msgs[i] = (struct pl_msg){.topic = "pay", .offset = i};
                f->ents[i].msg = &f->msgs[i];
                f->ptrs[i] = &f->ents[i];
        }
}

static void fixture_free(struct fixture *f)
{
        for (int i = 0; i < 100; i++)
                pl_state_clear(&f->ents[i].st);
}

/* Runs batches from the buffer's head as the runner does: the message at
 * `bad` makes any batch holding it fail unnamed. Returns the batches run
 * until `bad` is the buffer's head and has failed `attempts` times alone. */
static int run_until_blamed(struct fixture *f, size_t first, size_t bad, int attempts)
{
        int batches = 0;
        while (f->ents[bad].st.attempts < attempts) {
                size_t n = split_take(&f->s, 100 - first);
                int fails = first <= bad && bad < first + n;
                enum pl_rc rc = split_after(&f->s, &f->pt, f->ptrs + first, n, fails ? PL_SPLIT : PL_OK, "refused");
                batches++;
                if (rc == PL_OK)
                        first += n;
                assert_true(batches < 200);
        }
        return batches;
}

static void halves_until_alone(void **state)
{
        struct fixture f;
        (void)state;
        fixture(&f);
        int batches = run_until_blamed(&f, 0, 37, 3);
        assert_int_equal(f.ents[37].st.attempts, 3);
        assert_string_equal(f.ents[37].st.fail_reason, "refused");
        /* Its neighbours never counted an attempt. */
        for (int i = 0; i < 100; i++)
                if (i != 37)
                        assert_int_equal(f.ents[i].st.attempts, 0);
        /* log2(100) narrowings and the commits around them, plus three alone. */
        assert_true(batches <= 7 + 7 + 3);
        fixture_free(&f);
}

static void narrowed_result_and_alone_result(void **state)
{
        struct fixture f;
        (void)state;
        fixture(&f);
        assert_int_equal(split_take(&f.s, 100), 100);
        assert_int_equal(split_after(&f.s, &f.pt, f.ptrs, 100, PL_SPLIT, "x"), PL_SPLIT);
        assert_int_equal(split_take(&f.s, 100), 50);
        assert_int_equal(split_after(&f.s, &f.pt, f.ptrs, 1, PL_SPLIT, "x"), PL_RETRY); /* alone: its own attempt */
        assert_int_equal(f.ents[0].st.attempts, 1);
        /* Other results pass through unchanged. */
        assert_int_equal(split_after(&f.s, &f.pt, f.ptrs, 5, PL_DB_DOWN, "x"), PL_DB_DOWN);
        assert_int_equal(split_after(&f.s, &f.pt, f.ptrs, 5, PL_RETRY, "x"), PL_RETRY);
        fixture_free(&f);
}

static void whole_again_after_the_failed_batch(void **state)
{
        struct fixture f;
        (void)state;
        fixture(&f);
        (void)split_after(&f.s, &f.pt, f.ptrs, 10, PL_SPLIT, "x"); /* 10 failed */
        assert_int_equal(split_take(&f.s, 100), 5);
        (void)split_after(&f.s, &f.pt, f.ptrs, 5, PL_OK, NULL);
        assert_int_equal(split_take(&f.s, 95), 5); /* 5 of the failed batch still to go */
        (void)split_after(&f.s, &f.pt, f.ptrs + 5, 5, PL_OK, NULL);
        assert_int_equal(split_take(&f.s, 90), 90);
        split_reset(&f.s);
        assert_int_equal(split_take(&f.s, 90), 90);
        fixture_free(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(halves_until_alone),
                cmocka_unit_test(narrowed_result_and_alone_result),
                cmocka_unit_test(whole_again_after_the_failed_batch),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
