/* test_buckets: keys.layout: partitioned's arithmetic — the time a message's
 * text names, the day and bucket it falls in, the label a key begins with —
 * and the statements said of dedupd.keys_p instead of dedupd.keys. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/bucket_time.h"
#include "pg/layout.h"
#include "unit.h"

#define DAY BUCKET_DAY_MS
/* 2026-12-01: day 20788 since 1970-01-01 */
#define D20261201 20788LL

struct parse_case {
        const char *in;
        int rc;
        int64_t ms;
};

static const struct parse_case parse_cases[] = {
        {"2026-12-01", 0, D20261201 *DAY},
        {"2026-12-01T23:59:59+09:00", 0, D20261201 *DAY}, /* its date as written, whatever the zone */
        {"2026-12-01t00:00:00Z", 0, D20261201 *DAY},
        {"2026-12-01 08:00", 0, D20261201 *DAY},
        {"2024-02-29", 0, 19782LL * DAY}, /* a leap day */
        {"1970-01-01", 0, 0},
        {"1796083200", 0, 1796083200000LL},    /* Unix seconds: 2026-12-01 */
        {"1796083200123", 0, 1796083200123LL}, /* milliseconds */
        {"0", 0, 0},
        {"2026-02-29", -1, 0}, /* not a leap year */
        {"2026-13-01", -1, 0},
        {"2026-12-32", -1, 0},
        {"2026-12-00", -1, 0},
        {"1969-12-31", -1, 0}, /* before the epoch: no bucket */
        {"2026-12-01X", -1, 0},
        {"2026-1-01", -1, 0},
        {"yesterday", -1, 0},
        {"", -1, 0},
        {"-1796083200", -1, 0},
        {"1796083200123456", -1, 0}, /* 16 digits: neither seconds nor milliseconds */
        {"1.5e9", -1, 0},
};

static void test_parse(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(parse_cases) / sizeof(*parse_cases); i++) {
                const struct parse_case *c = &parse_cases[i];
                int64_t ms = -7;
                char why[128] = "";
                int rc = bucket_time_parse(c->in, &ms, why, sizeof(why));
                if (rc != c->rc || (rc == 0 && ms != c->ms))
                        fail_msg("'%s': rc %d ms %lld, wanted rc %d ms %lld", c->in, rc, (long long)ms, c->rc,
                                 (long long)c->ms);
                if (rc)
                        assert_non_null(strstr(why, "not a date"));
        }
}

static void test_days_and_labels(void **state)
{
        (void)state;
        char label[BUCKET_LABEL_SIZE], date[11];
        assert_int_equal(bucket_day_of(D20261201 * DAY), D20261201);
        assert_int_equal(bucket_day_of(D20261201 * DAY + DAY - 1), D20261201);
        assert_int_equal(bucket_day_of(-1), -1); /* rounded down, not toward zero */
        bucket_label(D20261201, label);
        assert_string_equal(label, "@2026-12-01|");
        bucket_date(19782, date);
        assert_string_equal(date, "2024-02-29");
        bucket_date(0, date);
        assert_string_equal(date, "1970-01-01");
        /* buckets of 30 days begin on multiples of 30 since 1970 */
        assert_int_equal(bucket_start(D20261201, 1), D20261201);
        assert_int_equal(bucket_start(D20261201, 30), D20261201 - D20261201 % 30);
        assert_int_equal(bucket_start(29, 30), 0);
        assert_int_equal(bucket_start(30, 30), 30);
        assert_int_equal(bucket_start(-1, 30), -30);
        /* labels sort as their days: the partitions' ranges rely on it */
        char a[BUCKET_LABEL_SIZE], b[BUCKET_LABEL_SIZE];
        for (int64_t d = 0; d < 40000; d += 97) {
                bucket_label(d, a);
                bucket_label(d + 1, b);
                assert_true(strcmp(a, b) < 0);
        }
}

struct rewrite_case {
        const char *in, *out;
};

static const struct rewrite_case rewrite_cases[] = {
        {"SELECT 1 FROM dedupd.keys WHERE x", "SELECT 1 FROM dedupd.keys_p WHERE x"},
        {"UPDATE dedupd.keys d SET a = 1 FROM dedupd.keys e", "UPDATE dedupd.keys_p d SET a = 1 FROM dedupd.keys_p e"},
        {"INSERT INTO dedupd.keys(namespace)", "INSERT INTO dedupd.keys_p(namespace)"},
        {"SELECT * FROM dedupd.keys", "SELECT * FROM dedupd.keys_p"},
        {"SELECT * FROM dedupd.keys_p", "SELECT * FROM dedupd.keys_p"},             /* already */
        {"SELECT * FROM dedupd.keys_pending", "SELECT * FROM dedupd.keys_pending"}, /* another name */
        {"SELECT * FROM xdedupd.keys", "SELECT * FROM xdedupd.keys"},
        {"SELECT * FROM dedupd.outbox", "SELECT * FROM dedupd.outbox"},
};

static void test_rewrite(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(rewrite_cases) / sizeof(*rewrite_cases); i++) {
                char *s = keys_layout_rewrite(rewrite_cases[i].in);
                assert_string_equal(s, rewrite_cases[i].out);
                free(s);
        }
}

static void test_layout_sql(void **state)
{
        (void)state;
        const char *q = "SELECT count(*) FROM dedupd.keys WHERE namespace = $1";
        keys_layout_set(KEYS_HEAP);
        assert_ptr_equal(keys_layout_sql(q), q); /* heap: the statement as written */
        keys_layout_set(KEYS_PARTITIONED);
        const char *p = keys_layout_sql(q);
        assert_string_equal(p, "SELECT count(*) FROM dedupd.keys_p WHERE namespace = $1");
        assert_ptr_equal(keys_layout_sql(q), p); /* once per text */
        const char *o = "SELECT 1 FROM dedupd.outbox";
        assert_string_equal(keys_layout_sql(o), o);
        keys_layout_set(KEYS_HEAP);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse),
                cmocka_unit_test(test_days_and_labels),
                cmocka_unit_test(test_rewrite),
                cmocka_unit_test(test_layout_sql),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
