/* test_replication: when a failover can lose acknowledged commits, as the server's settings say. */
#include <stdio.h>

#include "pg/replication.h"
#include "unit.h"

struct rep_case {
        const char *name;
        const char *commit, *standbys;
        int sync;
        const char *why; /* when not: in the reason */
};

static const struct rep_case cases[] = {
        {"no standby named", "on", "", 0, "synchronous_standby_names is empty"},
        {"one standby, on", "on", "replica1", 1, NULL},
        {"quorum, remote_apply", "remote_apply", "ANY 1 (a, b)", 1, NULL},
        {"first, remote_write", "remote_write", "FIRST 1 (a)", 1, NULL},
        {"a standby, but local", "local", "replica1", 0, "synchronous_commit is local"},
        {"a standby, but off", "off", "*", 0, "synchronous_commit is off"},
        {"off and no standby", "off", "", 0, "synchronous_standby_names is empty"},
};

static void rep_case(void **state)
{
        const struct rep_case *c = *state;
        struct store_replication r = {0};
        char why[256] = "";
        snprintf(r.synchronous_commit, sizeof(r.synchronous_commit), "%s", c->commit);
        snprintf(r.synchronous_standby_names, sizeof(r.synchronous_standby_names), "%s", c->standbys);
        assert_int_equal(replication_sync(&r, why, sizeof(why)), c->sync);
        if (!c->sync)
                assert_contains(why, c->why);
}

int main(void)
{
        struct unit_list l = {0};
        unit_add_table(&l, rep_case, cases);
        return unit_run("replication", &l);
}
