/* test_sql_statement: the SQL handler's statement — what becomes a parameter, what stays SQL, and the values a message binds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "statement.h"
#include "unit.h"

struct compile_case {
        const char *src;
        const char *want_sql; /* NULL: refused */
        size_t want_params;
        const char *want_err; /* when refused: part of the message */
};

static const struct compile_case compile_cases[] = {
        {"SELECT {json:a}", "SELECT $1", 1, NULL},
        /* one source twice is one parameter; numbered in order of appearance */
        {"SELECT {json:b}, {idem_key}, {json:b}::int", "SELECT $1, $2, $1::int", 2, NULL},
        {"INSERT INTO t VALUES ({topic}, {partition}, {offset}, {key}, {header:h})",
         "INSERT INTO t VALUES ($1, $2, $3, $4, $5)", 5, NULL},
        /* quotes, identifiers, comments and dollar quotes are SQL */
        {"SELECT '{json:a}', \"{json:a}\", {json:a} -- {json:b}\n", "SELECT '{json:a}', \"{json:a}\", $1 -- {json:b}\n",
         1, NULL},
        {"SELECT 'it''s {json:a}' /* {json:b} */, {json:c}", "SELECT 'it''s {json:a}' /* {json:b} */, $1", 1, NULL},
        {"SELECT $x${json:a}$x$, $${json:b}$$, {json:c}", "SELECT $x${json:a}$x$, $${json:b}$$, $1", 1, NULL},
        /* a brace naming no source is SQL: array literals, JSON */
        {"SELECT '{1,2}'::int[], {json:a}", "SELECT '{1,2}'::int[], $1", 1, NULL},
        {"SELECT {nothing}", "SELECT {nothing}", 0, NULL},
        /* refused */
        {"SELECT $1", NULL, 0, "a parameter of its own"},
        {"", NULL, 0, "empty"},
        {"   \n", NULL, 0, "empty"},
        {"SELECT {json:a..b}", NULL, 0, "source {json:a..b}"},
        {"SELECT {header:}", NULL, 0, "needs a header name"},
};

static void test_compile(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(compile_cases) / sizeof(*compile_cases); i++) {
                const struct compile_case *c = &compile_cases[i];
                char err[512] = "";
                struct sql_statement *st = sql_statement_compile(c->src, err, sizeof(err));
                if (!c->want_sql) {
                        if (st)
                                fail_msg("case %zu (%s): compiled to \"%s\", want refused", i, c->src, st->sql);
                        assert_contains(err, c->want_err);
                        continue;
                }
                if (!st)
                        fail_msg("case %zu (%s): refused: %s", i, c->src, err);
                assert_string_equal(st->sql, c->want_sql);
                assert_int_equal(st->nparams, c->want_params);
                sql_statement_free(st);
        }
}

static void test_too_many_sources(void **state)
{
        (void)state;
        char src[8192] = "SELECT 1", err[256];
        for (int i = 0; i <= SQL_STATEMENT_MAX_PARAMS; i++)
                snprintf(src + strlen(src), sizeof(src) - strlen(src), ", {json:f%d}", i);
        assert_null(sql_statement_compile(src, err, sizeof(err)));
        assert_contains(err, "more than 64 distinct sources");
}

static struct dedupd_msg msg(const char *payload)
{
        static const struct dedupd_header h[] = {{"h", "hv", 2}};
        return (struct dedupd_msg){.topic = "payments",
                                   .partition = 3,
                                   .offset = 42,
                                   .key = "k1",
                                   .key_len = 2,
                                   .value = payload,
                                   .value_len = payload ? strlen(payload) : 0,
                                   .headers = h,
                                   .header_cnt = 1,
                                   .idem_key = "9527/PAY"};
}

static void test_bind(void **state)
{
        (void)state;
        char err[512], *v[8];
        struct sql_statement *st = sql_statement_compile(
                "SELECT {json:amount}, {json:user.name}, {idem_key}, {topic}, {partition}, {offset}, {key}, {header:h}",
                err, sizeof(err));
        assert_non_null(st);
        struct dedupd_msg m = msg("{\"amount\":9007199254740993,\"user\":{\"name\":\"a/b%c\"}}");
        assert_int_equal(sql_statement_bind(st, &m, v, err, sizeof(err)), 0);
        const char *want[] = {"9007199254740993", "a/b%c", "9527/PAY", "payments", "3", "42", "k1", "hv"};
        for (size_t i = 0; i < 8; i++)
                assert_string_equal(v[i], want[i]); /* exact, and not encoded as keys are */
        sql_values_free(v, st->nparams);
        sql_statement_free(st);
}

static void test_bind_refused(void **state)
{
        (void)state;
        static const struct {
                const char *payload, *want;
        } cases[] = {
                {"{\"user_id\":3}", "json field 'amount' is missing"},
                {"{\"amount\":1.5}", "with a fraction"},
                {"{\"amount\":{\"x\":1}}", "not a scalar"},
                {"{\"amount\":1,\"amount\":2}", "ambiguous"},
                {"not json", "not valid JSON"},
                {NULL, "payload is empty"},
        };
        char err[512], *v[1];
        struct sql_statement *st = sql_statement_compile("SELECT {json:amount}", err, sizeof(err));
        assert_non_null(st);
        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
                struct dedupd_msg m = msg(cases[i].payload);
                err[0] = '\0';
                assert_int_equal(sql_statement_bind(st, &m, v, err, sizeof(err)), -1);
                assert_contains(err, cases[i].want);
                assert_null(v[0]);
        }
        /* an empty string is a value (a key part would refuse it) */
        struct dedupd_msg m = msg("{\"amount\":\"\"}");
        assert_int_equal(sql_statement_bind(st, &m, v, err, sizeof(err)), 0);
        assert_string_equal(v[0], "");
        sql_values_free(v, 1);
        sql_statement_free(st);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_compile),
                cmocka_unit_test(test_too_many_sources),
                cmocka_unit_test(test_bind),
                cmocka_unit_test(test_bind_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
