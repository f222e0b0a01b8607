/* test_outbox_args: what dedupctl outbox accepts — its actions, row ids, --all, --unsent, --limit — before any config is read. */
#include <stdio.h>
#include <string.h>

#include "tools/outbox.h"
#include "unit.h"

struct args_case {
        const char *name;
        const char *words[4]; /* after "outbox", NULL-terminated */
        int all, unsent;
        const char *limit;
        int rc;           /* 0 or -1 */
        const char *want; /* rc 0: "ACTION:all:unsent:limit:ids"; -1: part of the message */
};

static const struct args_case cases[] = {
        {"outbox list", {"list"}, 0, 0, NULL, 0, "0:0:0:100:"},
        {"outbox list --unsent --limit 5", {"list"}, 0, 1, "5", 0, "0:0:1:5:"},
        {"outbox retry 7 12", {"retry", "7", "12"}, 0, 0, NULL, 0, "1:0:0:100:7,12,"},
        {"outbox retry --all", {"retry"}, 1, 0, NULL, 0, "1:1:0:100:"},
        {"outbox drop 3", {"drop", "3"}, 0, 0, NULL, 0, "2:0:0:100:3,"},
        {"outbox with no action", {NULL}, 0, 0, NULL, -1, "expects list, retry or drop"},
        {"outbox of an unknown action", {"requeue"}, 0, 0, NULL, -1, "expects list, retry or drop"},
        {"outbox retry with neither IDs nor --all",
         {"retry"},
         0,
         0,
         NULL,
         -1,
         "takes the IDs of given-up rows, or --all"},
        {"outbox drop with IDs and --all", {"drop", "3"}, 1, 0, NULL, -1, "or --all"},
        {"outbox retry of a row id that is not a number",
         {"retry", "x1"},
         0,
         0,
         NULL,
         -1,
         "'x1' is not an outbox row id"},
        {"outbox retry of row 0", {"retry", "0"}, 0, 0, NULL, -1, "'0' is not an outbox row id"},
        {"outbox retry with --limit", {"retry", "4"}, 0, 0, "3", -1, "--unsent and --limit go with list"},
        {"outbox list with an ID", {"list", "4"}, 0, 0, NULL, -1, "list takes no ID"},
        {"outbox list --limit 0", {"list"}, 0, 0, "0", -1, "--limit '0'"},
        {"outbox list --limit 5x", {"list"}, 0, 0, "5x", -1, "--limit '5x'"},
};

static void test_case(void **state)
{
        const struct args_case *c = *state;
        struct outbox_opts o;
        char err[256] = "", got[256];
        int argc = 0;
        while (argc < 4 && c->words[argc])
                argc++;
        int rc = outbox_parse(argc, (char *const *)c->words, c->all, c->unsent, c->limit, &o, err, sizeof(err));
        assert_int_equal(rc, c->rc);
        if (rc) {
                assert_contains(err, c->want);
        } else {
                size_t at = (size_t)snprintf(got, sizeof(got), "%d:%d:%d:%d:", (int)o.action, o.all, o.unsent, o.limit);
                for (size_t i = 0; i < o.nids; i++)
                        at += (size_t)snprintf(got + at, sizeof(got) - at, "%lld,", (long long)o.ids[i]);
                assert_string_equal(got, c->want);
        }
        outbox_opts_free(&o);
}

int main(void)
{
        struct unit_list l = {0};
        unit_add_table(&l, test_case, cases);
        return unit_run("outbox_args", &l);
}
