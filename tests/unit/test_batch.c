/* test_batch: the pure steps of a batch — which messages count as one key, in which order keys are claimed, what a handler result means, what is counted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/batch.h"
#include "unit.h"

/* A batch of messages given as "partition:offset:key" (key "-": dead-lettered). */
struct fixture {
        struct pl_msg msgs[16];
        struct pl_entry ents[16]; /* each message beside its state, as the runner holds them */
        struct pl_entry *ptrs[16];
        size_t n;
        struct topic_conf t;
        struct batch b;
};

static void fixture(struct fixture *f, const char *const *spec)
{
        memset(f, 0, sizeof(*f));
        f->t.name = "pay";
        for (; spec[f->n]; f->n++) {
                struct pl_msg *m = &f->msgs[f->n];
                struct pl_state *st = &f->ents[f->n].st;
                char key[64];
                int p;
                long long o;
                if (sscanf(spec[f->n], "%d:%lld:%63s", &p, &o, key) != 3)
                        fail_msg("bad spec %s", spec[f->n]);
                *m = (struct pl_msg){.topic = "pay", .partition = p, .offset = o};
                f->ents[f->n].msg = m;
                if (!strcmp(key, "-"))
                        st->dlq_reason = strdup("key: missing");
                else
                        st->idem_key = strdup(key);
                snprintf(st->fingerprint, sizeof(st->fingerprint), "fp-%s", key);
                f->ptrs[f->n] = &f->ents[f->n];
        }
        batch_init(&f->b, &f->t, f->ptrs, f->n);
}

static void fixture_free(struct fixture *f)
{
        batch_free(&f->b);
        for (size_t i = 0; i < f->n; i++)
                pl_state_clear(&f->ents[i].st);
}

/* Keys are claimed in bytewise order whatever the poll order; a key repeated
 * inside the batch counts once, its first occurrence holding it. */
static void dedupe_orders_and_counts_repeats_once(void **state)
{
        (void)state;
        struct fixture f;
        fixture(&f, (const char *const[]){"0:10:b/PAY", "1:3:a/PAY", "0:11:b/PAY", "0:12:-", "1:4:B/PAY", "1:5:a/PAY",
                                          NULL});
        assert_int_equal(batch_mark_dead_letters(&f.b), 1);
        batch_dedupe(&f.b);
        assert_int_equal(f.b.nkeys, 3);
        assert_string_equal(f.ents[f.b.keys[0]].st.idem_key, "B/PAY"); /* bytewise: 'B' < 'a' < 'b' */
        assert_string_equal(f.ents[f.b.keys[1]].st.idem_key, "a/PAY");
        assert_string_equal(f.ents[f.b.keys[2]].st.idem_key, "b/PAY");
        assert_int_equal(f.b.keys[1], 1); /* the earliest occurrence holds the key */
        assert_int_equal(f.b.keys[2], 0);
        assert_int_equal(f.b.items[2].state, ITEM_REPEAT);
        assert_int_equal(f.b.items[2].first, 0);
        assert_int_equal(f.b.items[5].state, ITEM_REPEAT);
        assert_int_equal(f.b.items[5].first, 1);
        assert_int_equal(f.b.items[3].state, ITEM_DEAD_LETTER);
        fixture_free(&f);
}

/* After the claim the handler sees the fresh keys in batch order, not key order. */
static void claimed_keys_run_in_batch_order(void **state)
{
        (void)state;
        struct fixture f;
        fixture(&f, (const char *const[]){"0:1:z", "0:2:m", "0:3:a", "0:4:q", NULL});
        batch_mark_dead_letters(&f.b);
        batch_dedupe(&f.b); /* keys: a, m, q, z */
        batch_claimed(&f.b, (const int[]){1, 0, 1, 1});
        assert_int_equal(f.b.nfresh, 3);
        assert_int_equal(f.b.fresh[0], 0); /* z */
        assert_int_equal(f.b.fresh[1], 2); /* a */
        assert_int_equal(f.b.fresh[2], 3); /* q */
        assert_int_equal(f.b.items[1].state, ITEM_KNOWN);
        assert_true(f.b.items[1].known);
        fixture_free(&f);
}

/* A repeat of a fresh key is served that key's outcome from this batch; a
 * duplicate of a known key the stored one, even when the known key's own
 * message was dead-lettered for another payload. */
static void duplicates_get_the_first_outcome(void **state)
{
        (void)state;
        struct fixture f;
        fixture(&f, (const char *const[]){"0:1:k1", "0:2:k2", "0:3:k1", "0:4:k2", NULL});
        batch_mark_dead_letters(&f.b);
        batch_dedupe(&f.b);
        batch_claimed(&f.b, (const int[]){1, 0}); /* k1 fresh, k2 known */
        f.b.items[0].state = ITEM_REJECTED;
        f.b.items[1].stored = (struct first_outcome){KEY_DONE, strdup("debited 10"), strdup("fp-stored")};
        f.b.items[1].state = ITEM_DEAD_LETTER; /* its payload differed: dead-lettered */
        enum key_status st;
        const char *resp;
        batch_first_outcome(&f.b, &f.b.items[2], &st, &resp);
        assert_int_equal(st, KEY_FAILED);
        assert_string_equal(resp, "rejected");
        batch_first_outcome(&f.b, &f.b.items[3], &st, &resp);
        assert_int_equal(st, KEY_DONE);
        assert_string_equal(resp, "debited 10");
        assert_string_equal(batch_first_fingerprint(&f.b, &f.b.items[3]), "fp-stored");
        assert_string_equal(batch_first_fingerprint(&f.b, &f.b.items[2]), "fp-k1");
        fixture_free(&f);
}

struct verdict_case {
        const char *name;
        dedupd_result_t r;
        int aborted, savepoints;
        enum handler_verdict want;
};

static const struct verdict_case verdict_cases[] = {
        {"verdict: OK applies", DEDUPD_OK, 0, 0, VERDICT_APPLIED},
        {"verdict: OK on an aborted transaction is retried", DEDUPD_OK, 1, 1, VERDICT_RETRY},
        {"verdict: REJECT is recorded", DEDUPD_REJECT, 0, 0, VERDICT_REJECTED},
        {"verdict: REJECT after an SQL error, with a savepoint to undo it", DEDUPD_REJECT, 1, 1, VERDICT_REJECTED},
        {"verdict: REJECT after an SQL error without a savepoint is retried", DEDUPD_REJECT, 1, 0, VERDICT_RETRY},
        {"verdict: RETRY is retried", DEDUPD_RETRY, 0, 1, VERDICT_RETRY},
        {"verdict: an unknown result is retried", (dedupd_result_t)42, 0, 1, VERDICT_RETRY},
};

static void verdict_case(void **state)
{
        const struct verdict_case *c = *state;
        assert_int_equal(batch_verdict(c->r, c->aborted, c->savepoints), c->want);
}

/* Progress: per partition, the next offset after the last message, the
 * first offset, and each outcome counted once. */
static void progress_counts_each_outcome(void **state)
{
        (void)state;
        struct fixture f;
        fixture(&f, (const char *const[]){"0:7:a", "1:3:b", "0:8:c", "0:9:-", "1:4:d", "1:5:e", "0:10:f", NULL});
        enum item_state st[] = {ITEM_APPLIED, ITEM_REJECTED, ITEM_KNOWN,  ITEM_DEAD_LETTER,
                                ITEM_REPEAT,  ITEM_LOST,     ITEM_SKIPPED};
        for (size_t i = 0; i < f.n; i++)
                f.b.items[i].state = st[i];
        f.b.items[2].mismatch = 1;
        batch_count(&f.b);
        assert_int_equal(f.b.nprog, 2);
        const struct store_progress *p0 = &f.b.prog[0], *p1 = &f.b.prog[1];
        assert_int_equal(p0->partition, 0);
        assert_int_equal(p0->from_offset, 7);
        assert_int_equal(p0->next_offset, 11);
        assert_int_equal(p0->consumed, 4);
        assert_int_equal(p0->applied, 1);
        assert_int_equal(p0->duplicates, 2); /* known, skipped */
        assert_int_equal(p0->dead_lettered, 1);
        assert_int_equal(p0->mismatches, 1);
        assert_int_equal(p1->partition, 1);
        assert_int_equal(p1->from_offset, 3);
        assert_int_equal(p1->next_offset, 6);
        assert_int_equal(p1->consumed, 3); /* the lost one is consumed only */
        assert_int_equal(p1->rejected, 1);
        assert_int_equal(p1->duplicates, 1);
        fixture_free(&f);
}

int main(void)
{
        struct unit_list l = {0};
        unit_add(&l, "dedupe: keys in bytewise order, a repeat counts once", dedupe_orders_and_counts_repeats_once,
                 NULL);
        unit_add(&l, "claim: fresh keys run in batch order", claimed_keys_run_in_batch_order, NULL);
        unit_add(&l, "duplicates: the first outcome, from this batch or stored", duplicates_get_the_first_outcome,
                 NULL);
        unit_add_table(&l, verdict_case, verdict_cases);
        unit_add(&l, "progress: per partition, each outcome once", progress_counts_each_outcome, NULL);
        return unit_run("batch", &l);
}
