/* test_hostport: http.listen as an operator writes it — what is an address, and what only this host can reach. */
#include <stdio.h>

#include "base/hostport.h"
#include "unit.h"

struct hp_case {
        const char *name;
        const char *in;
        const char *host, *port; /* NULL host: refused */
        const char *err;         /* ...with this in the reason */
        int loopback;
};

static const struct hp_case cases[] = {
        {"v4 loopback", "127.0.0.1:9400", "127.0.0.1", "9400", NULL, 1},
        {"v4 loopback, any of 127/8", "127.1.2.3:0", "127.1.2.3", "0", NULL, 1},
        {"localhost", "localhost:9400", "localhost", "9400", NULL, 1},
        {"LOCALHOST", "LOCALHOST:1", "LOCALHOST", "1", NULL, 1},
        {"v6 loopback", "[::1]:9400", "::1", "9400", NULL, 1},
        {"v4-mapped loopback", "[::ffff:127.0.0.1]:9400", "::ffff:127.0.0.1", "9400", NULL, 1},
        {"every interface, v4", "0.0.0.0:9400", "0.0.0.0", "9400", NULL, 0},
        {"every interface, v6", "[::]:9400", "::", "9400", NULL, 0},
        {"every interface, no host", ":9400", "", "9400", NULL, 0},
        {"a LAN address", "10.0.0.5:9400", "10.0.0.5", "9400", NULL, 0},
        {"a host name", "metrics.internal:9400", "metrics.internal", "9400", NULL, 0},
        {"not 127 but 128", "128.0.0.1:9400", "128.0.0.1", "9400", NULL, 0},
        {"highest port", "127.0.0.1:65535", "127.0.0.1", "65535", NULL, 1},
        {"no port", "127.0.0.1", NULL, NULL, "is not host:port", 0},
        {"empty port", "127.0.0.1:", NULL, NULL, "is not host:port", 0},
        {"port too large", "127.0.0.1:65536", NULL, NULL, "the port must be a number from 0 to 65535", 0},
        {"port far too large", "127.0.0.1:99999999999", NULL, NULL, "the port must be a number", 0},
        {"port not a number", "127.0.0.1:http", NULL, NULL, "the port must be a number", 0},
        {"negative port", "127.0.0.1:-1", NULL, NULL, "the port must be a number", 0},
        {"v6 without brackets", "::1:9400", NULL, NULL, "an IPv6 address goes in brackets, \"[::1]:9400\"", 0},
        {"nothing", "", NULL, NULL, "is not host:port", 0},
};

static void hp_case(void **state)
{
        const struct hp_case *c = *state;
        char host[256] = "", port[8] = "", err[256] = "";
        int rc = hostport_split(c->in, host, sizeof(host), port, sizeof(port), err, sizeof(err));
        if (c->host) {
                if (rc)
                        fail_msg("refused: %s", err);
                assert_string_equal(host, c->host);
                assert_string_equal(port, c->port);
                assert_int_equal(hostport_check(c->in, err, sizeof(err)), 0);
        } else {
                assert_int_equal(rc, -1);
                assert_contains(err, c->err);
                /* "" is a value of http.listen: nothing served */
                assert_int_equal(hostport_check(c->in, err, sizeof(err)), *c->in ? -1 : 0);
        }
        assert_int_equal(hostport_loopback(c->in), c->loopback);
}

int main(void)
{
        struct unit_list l = {0};
        unit_add_table(&l, hp_case, cases);
        return unit_run("hostport", &l);
}
