/* test_conninfo: what libpq is handed — dedupd's connect_timeout added, everything else (the password above all) as written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg/conninfo.h"
#include "unit.h"

static const char *value_of(const struct conninfo_params *p, const char *key)
{
        for (size_t i = 0; p->keys[i]; i++)
                if (!strcmp(p->keys[i], key))
                        return p->values[i];
        return NULL;
}

static const struct timeout_case {
        const char *name, *conninfo;
        int64_t cap_ms;
        const char *env; /* PGCONNECT_TIMEOUT, NULL: unset */
        int want;        /* the connect_timeout handed over, 0: none */
        const char *password;
} cases[] = {
        {"conninfo: no connect_timeout gets 10 s", "host=db dbname=x password=p", 0, NULL, 10, "p"},
        {"conninfo: the conninfo's own is kept", "host=db connect_timeout=3", 0, NULL, 3, NULL},
        {"conninfo: PGCONNECT_TIMEOUT is respected", "host=db", 0, "7", 7, NULL},
        {"conninfo: the conninfo wins over PGCONNECT_TIMEOUT", "host=db connect_timeout=4", 0, "7", 4, NULL},
        {"conninfo: a URI, its password decoded by libpq", "postgresql://u:p%40ss@db:5433/x", 0, NULL, 10, "p@ss"},
        {"conninfo: a deadline shortens it, rounded up", "host=db", 4500, NULL, 5, NULL},
        {"conninfo: a deadline bounds even 'wait for ever'", "host=db connect_timeout=0", 3000, NULL, 3, NULL},
        {"conninfo: a longer deadline changes nothing", "host=db connect_timeout=2", 60000, NULL, 2, NULL},
        {"conninfo: a password that looks like a parameter stays a password",
         "password='x connect_timeout=1 host=evil' host=db", 0, NULL, 10, "x connect_timeout=1 host=evil"},
};

static void timeout_case(void **state)
{
        const struct timeout_case *c = *state;
        struct conninfo_params p;
        char err[256];
        if (c->env)
                setenv("PGCONNECT_TIMEOUT", c->env, 1);
        else
                unsetenv("PGCONNECT_TIMEOUT");
        assert_int_equal(conninfo_params_init(&p, c->conninfo, 10, c->cap_ms, err, sizeof(err)), 0);
        unsetenv("PGCONNECT_TIMEOUT");
        assert_int_equal(conninfo_timeout_s(&p), c->want);
        if (c->password)
                assert_string_equal(value_of(&p, "password"), c->password);
        /* exactly one connect_timeout, nothing else added */
        size_t n = 0;
        for (size_t i = 0; p.keys[i]; i++)
                n += !strcmp(p.keys[i], "connect_timeout");
        assert_int_equal(n, 1);
        assert_string_equal(value_of(&p, "host") ? value_of(&p, "host") : "db", "db");
        conninfo_params_free(&p);
}

static void unparsable(void **state)
{
        (void)state;
        struct conninfo_params p;
        char err[256];
        static const char *const bad[] = {
                "host=db password=a S3cret",    "host=db password=a S3cret=1",       "password='S3cret",
                "postgresql://u:S3cret@[::1/x", "postgresql://u:S3cret@db/x?S3cret",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                assert_int_equal(conninfo_params_init(&p, bad[i], 10, 0, err, sizeof(err)), -1);
                assert_true(strlen(err) > 10);
                if (strstr(err, "S3cret"))
                        fail_msg("the password reached the message: %s", err);
        }
        assert_int_equal(conninfo_params_init(&p, "host=db password=a S3cret", 10, 0, err, sizeof(err)), -1);
        assert_contains(err, "missing \"=\" after \"...\"");
}

int main(void)
{
        struct unit_list l = {0};
        unit_add_table(&l, timeout_case, cases);
        unit_add(&l, "conninfo: one that does not parse is refused with libpq's reason", unparsable, NULL);
        return unit_run("conninfo", &l);
}
