/* test_msg_state: the runner's entries — the protocol's state of a message starts empty on every message, and an entry stays where it is while the pool grows (a lane works on it meanwhile). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/msg_state.h"
#include "unit.h"

/* A reused entry must not carry the last message's key, reason or attempts
 * over to the next message: it would be deduplicated by another's key. */
static void given_back_entry_comes_back_empty(void **state)
{
        (void)state;
        struct pl_pool p = {0};
        struct pl_msg a = {.topic = "pay", .offset = 1}, b = {.topic = "pay", .offset = 2};
        struct pl_entry *e = pl_pool_take(&p, &a);
        assert_ptr_equal(e->msg, &a);
        e->st.idem_key = strdup("k1/PAY");
        e->st.dlq_reason = strdup("key: missing");
        e->st.fail_reason = strdup("handler returned RETRY");
        e->st.attempts = 3;
        e->st.derived = 1;
        e->st.dead_lettered = 1;
        snprintf(e->st.fingerprint, sizeof(e->st.fingerprint), "fp");
        assert_ptr_equal(pl_pool_give(&p, e), &a);

        struct pl_entry *again = pl_pool_take(&p, &b);
        assert_ptr_equal(again, e); /* the same entry, reused */
        assert_ptr_equal(again->msg, &b);
        assert_null(again->st.idem_key);
        assert_null(again->st.key_text);
        assert_null(again->st.dlq_reason);
        assert_null(again->st.fail_reason);
        assert_int_equal(again->st.attempts, 0);
        assert_int_equal(again->st.derived, 0);
        assert_int_equal(again->st.dead_lettered, 0);
        assert_string_equal(again->st.fingerprint, "");
        assert_string_equal(again->st.stored_fingerprint, "");
        pl_pool_give(&p, again);
        pl_pool_free(&p);
}

/* Entries taken while others are in use are distinct, and what was written
 * into the first one is still there once the pool has grown past it. */
static void entries_stay_put_while_the_pool_grows(void **state)
{
        (void)state;
        enum { N = 5000 };
        struct pl_pool p = {0};
        struct pl_msg m[N];
        struct pl_entry *e[N];
        for (size_t i = 0; i < N; i++) {
                m[i] = (struct pl_msg){.topic = "pay", .offset = (int64_t)i};
                e[i] = pl_pool_take(&p, &m[i]);
                e[i]->st.attempts = (int)i;
        }
        for (size_t i = 0; i < N; i++) {
                assert_ptr_equal(e[i]->msg, &m[i]);
                assert_int_equal(e[i]->st.attempts, (int)i);
                if (i)
                        assert_ptr_not_equal(e[i], e[i - 1]);
        }
        e[0]->st.idem_key = strdup("left in use"); /* freed with the pool */
        for (size_t i = 1; i < N; i++)
                pl_pool_give(&p, e[i]);
        pl_pool_free(&p);
}

int main(void)
{
        struct unit_list l = {0};
        unit_add(&l, "entry: given back, it comes back with no state", given_back_entry_comes_back_empty, NULL);
        unit_add(&l, "entry: stays where it is while the pool grows", entries_stay_put_while_the_pool_grows, NULL);
        return unit_run("msg_state", &l);
}
