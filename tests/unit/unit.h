/* unit: small helpers shared by the cmocka unit tests. */
#ifndef DEDUPD_UNIT_H
#define DEDUPD_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Fails unless needle occurs in hay, printing both. */
#define assert_contains(hay, needle)                                                                                   \
        do {                                                                                                           \
                const char *hay_ = (hay), *needle_ = (needle);                                                         \
                if (!hay_ || !strstr(hay_, needle_))                                                                   \
                        fail_msg("expected \"%s\" in \"%s\"", needle_, hay_ ? hay_ : "(null)");                        \
        } while (0)

/* Fails unless s starts with prefix. */
#define assert_prefix(s, prefix)                                                                                       \
        do {                                                                                                           \
                const char *s_ = (s), *prefix_ = (prefix);                                                             \
                if (!s_ || strncmp(s_, prefix_, strlen(prefix_)))                                                      \
                        fail_msg("expected \"%s\" to start with \"%s\"", s_ ? s_ : "(null)", prefix_);                 \
        } while (0)

/* A test list built at run time, so that every row of a table is reported
 * as its own test under its own name. */
struct unit_list {
        struct CMUnitTest *t;
        size_t cnt;
};

static inline void unit_add(struct unit_list *l, const char *name, CMUnitTestFunction fn, const void *state)
{
        struct CMUnitTest *n = realloc(l->t, (l->cnt + 1) * sizeof(*n));
        if (!n)
                abort();
        l->t = n;
        l->t[l->cnt++] = (struct CMUnitTest){name, fn, NULL, NULL, (void *)(uintptr_t)state};
}

static inline void unit_add_tests(struct unit_list *l, const struct CMUnitTest *tests, size_t n)
{
        for (size_t i = 0; i < n; i++)
                unit_add(l, tests[i].name, tests[i].test_func, tests[i].initial_state);
}

/* Every table row struct begins with its name. */
#define unit_add_table(l, fn, rows)                                                                                    \
        do {                                                                                                           \
                for (size_t i_ = 0; i_ < sizeof(rows) / sizeof((rows)[0]); i_++)                                       \
                        unit_add((l), (rows)[i_].name, (fn), &(rows)[i_]);                                             \
        } while (0)

static inline int unit_run(const char *group, struct unit_list *l)
{
        int failed = _cmocka_run_group_tests(group, l->t, l->cnt, NULL, NULL);
        free(l->t);
        l->t = NULL;
        l->cnt = 0;
        return failed;
}

#endif
