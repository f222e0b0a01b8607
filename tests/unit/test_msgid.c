/* test_msgid: the identity of an outbox message — the digest a downstream can compute itself, distinct per place, and what may go out as an id. */
#include <stdio.h>
#include <string.h>

#include "base/msgid.h"
#include "unit.h"

#define REPLY                                                                                                          \
        {                                                                                                              \
                .slot = MSGID_REPLY                                                                                    \
        }
#define EMIT(n)                                                                                                        \
        {                                                                                                              \
                .slot = MSGID_EMIT, .ordinal = (n)                                                                     \
        }
#define DUP(t, p, o)                                                                                                   \
        {                                                                                                              \
                .slot = MSGID_DUPLICATE_REPLY, .topic = (t), .partition = (p), .offset = (o)                           \
        }

/* The digests, computed apart from dedupd (Python's hashlib over the same
 * NUL-ended fields): what a downstream consumer can derive on its own. */
struct vector_case {
        const char *name;
        const char *ns, *key;
        struct msgid_place p;
        const char *want;
};

static const struct vector_case vectors[] = {
        {"the reply of a key", "shop", "order-9527/PAY", REPLY,
         "0c6d6f0922da78607c9c0cedddf7edb8f038f34fb53be7581f22bb11c8c9f574"},
        {"the first emit of a key", "shop", "order-9527/PAY", EMIT(0),
         "22258f6b8569fe83b59db68d8bffda986761c78e6ac3016913e8c972877f542f"},
        {"a duplicate's reply, by its delivery", "shop", "order-9527/PAY", DUP("payments", 3, 41),
         "54c2f005cec8e828c93fff5ec13e266b28ceb79b1246c6ddbb2ba4ff83cfa7e2"},
};

static void test_vector(void **state)
{
        const struct vector_case *c = *state;
        char got[MSGID_LEN + 1];
        msgid_derive(c->ns, c->key, &c->p, got);
        assert_string_equal(got, c->want);
        assert_true(msgid_valid(got));
}

/* Two places that must never share an id: each pair differs in one thing. */
struct distinct_case {
        const char *name;
        const char *ns1, *key1;
        struct msgid_place p1;
        const char *ns2, *key2;
        struct msgid_place p2;
};

static const struct distinct_case distinct[] = {
        {"the reply and the first emit", "shop", "o1/PAY", REPLY, "shop", "o1/PAY", EMIT(0)},
        {"two emits of one message", "shop", "o1/PAY", EMIT(0), "shop", "o1/PAY", EMIT(1)},
        {"the reply and a duplicate's", "shop", "o1/PAY", REPLY, "shop", "o1/PAY", DUP("payments", 0, 7)},
        {"the replies to two duplicates", "shop", "o1/PAY", DUP("payments", 0, 7), "shop", "o1/PAY",
         DUP("payments", 0, 8)},
        {"duplicates on two partitions", "shop", "o1/PAY", DUP("payments", 0, 7), "shop", "o1/PAY",
         DUP("payments", 1, 7)},
        {"duplicates on two topics", "shop", "o1/PAY", DUP("a", 0, 7), "shop", "o1/PAY", DUP("b", 0, 7)},
        {"one key in two namespaces", "shop", "o1/PAY", REPLY, "billing", "o1/PAY", REPLY},
        {"two keys", "shop", "o1/PAY", REPLY, "shop", "o2/PAY", REPLY},
        {"fields that concatenate alike", "shop", "o1/PAYemit", REPLY, "shopo1/PAY", "emit", REPLY},
        {"a topic spelled like a partition", "shop", "o1/PAY", DUP("t1", 2, 3), "shop", "o1/PAY", DUP("t", 12, 3)},
};

static void test_distinct(void **state)
{
        const struct distinct_case *c = *state;
        char a[MSGID_LEN + 1], b[MSGID_LEN + 1];
        msgid_derive(c->ns1, c->key1, &c->p1, a);
        msgid_derive(c->ns2, c->key2, &c->p2, b);
        assert_string_not_equal(a, b);
}

/* The same inputs, the same id, however often (a replay, a failover). */
static void test_stable(void **state)
{
        (void)state;
        const struct msgid_place p = EMIT(3);
        char a[MSGID_LEN + 1], b[MSGID_LEN + 1];
        msgid_derive("shop", "sha256:00ff", &p, a);
        msgid_derive("shop", "sha256:00ff", &p, b);
        assert_string_equal(a, b);
        assert_int_equal(strlen(a), MSGID_LEN);
}

/* What may go out as an id (read back from dedupd.outbox.msg_id). */
struct valid_case {
        const char *name;
        const char *id;
        int valid;
};

static char longest[MSGID_MAX + 1], too_long[MSGID_MAX + 2];

static const struct valid_case valid[] = {
        {"a derived id", "0c6d6f0922da78607c9c0cedddf7edb8f038f34fb53be7581f22bb11c8c9f574", 1},
        {"a sequence id (a row from before migration 10)", "21", 1},
        {"the longest", longest, 1},
        {"one longer", too_long, 0},
        {"empty", "", 0},
        {"none", NULL, 0},
        {"a space", "a b", 0},
        {"a line break", "a\nb", 0},
        {"not ASCII", "caf\xc3\xa9", 0},
};

static void test_valid(void **state)
{
        const struct valid_case *c = *state;
        assert_int_equal(msgid_valid(c->id), c->valid);
}

int main(void)
{
        struct unit_list l = {0};
        memset(longest, 'x', MSGID_MAX);
        memset(too_long, 'x', MSGID_MAX + 1);
        unit_add_table(&l, test_vector, vectors);
        unit_add_table(&l, test_distinct, distinct);
        unit_add(&l, "the same inputs give the same id", test_stable, NULL);
        unit_add_table(&l, test_valid, valid);
        return unit_run("msgid", &l);
}
