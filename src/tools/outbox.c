/* outbox: dedupctl outbox — the rows the relay gave up (and those still waiting), put back for the relay, or dropped. */
#include "tools/outbox.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "pg/outbox_admin.h"
#include "pg/store.h"
#include "tools/rows.h"

#define LIST_DEFAULT 100

static int parse_action(const char *word, enum outbox_action *a)
{
        static const char *const names[] = {"list", "retry", "drop"};
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (!strcmp(word, names[i])) {
                        *a = (enum outbox_action)i;
                        return 0;
                }
        return -1;
}

static int parse_ids(int argc, char *const *argv, struct outbox_opts *o, char *err, size_t errsz)
{
        o->ids = xcalloc((size_t)argc + 1, sizeof(*o->ids));
        for (int i = 0; i < argc; i++) {
                char *end;
                long long v = strtoll(argv[i], &end, 10);
                if (!*argv[i] || *end || v < 1) {
                        snprintf(err, errsz, "'%s' is not an outbox row id (a positive number)", argv[i]);
                        return -1;
                }
                o->ids[o->nids++] = (int64_t)v;
        }
        return 0;
}

int outbox_parse(int argc, char *const *argv, int all, int unsent, const char *limit, struct outbox_opts *o, char *err,
                 size_t errsz)
{
        memset(o, 0, sizeof(*o));
        o->all = all;
        o->unsent = unsent;
        o->limit = LIST_DEFAULT;
        if (argc < 1 || parse_action(argv[0], &o->action)) {
                snprintf(err, errsz, "expects list, retry or drop");
                return -1;
        }
        if (o->action == OUTBOX_LIST) {
                char *end;
                long v = limit ? strtol(limit, &end, 10) : LIST_DEFAULT;
                if (argc > 1 || all) {
                        snprintf(err, errsz, "list takes no ID and no --all");
                        return -1;
                }
                if (limit && (!*limit || *end || v < 1 || v > 1000000)) {
                        snprintf(err, errsz, "--limit '%s': expected a number of rows from 1 to 1000000", limit);
                        return -1;
                }
                o->limit = (int)v;
                return 0;
        }
        if (unsent || limit) {
                snprintf(err, errsz, "--unsent and --limit go with list");
                return -1;
        }
        if ((argc > 1) == !!all) {
                snprintf(err, errsz, "%s takes the IDs of given-up rows, or --all", argv[0]);
                return -1;
        }
        return parse_ids(argc - 1, argv + 1, o, err, errsz);
}

void outbox_opts_free(struct outbox_opts *o)
{
        free(o->ids);
        o->ids = NULL;
}

static int list(struct store *s, const struct config *cfg, const struct outbox_opts *o)
{
        PGresult *r = NULL;
        int64_t given_up, waiting;
        char err[1024];
        if (store_outbox_counts(s, cfg->namespace, &given_up, &waiting, err, sizeof(err)) ||
            store_outbox_list(s, cfg->namespace, o->unsent, o->limit, &r, err, sizeof(err))) {
                fprintf(stderr, "dedupctl outbox: %s\n", err);
                return 2;
        }
        printf("namespace %s: %" PRId64 " outbox row(s) given up, %" PRId64 " waiting to be published\n",
               cfg->namespace, given_up, waiting);
        if (PQntuples(r))
                rows_print(r);
        if ((int64_t)PQntuples(r) < given_up + (o->unsent ? waiting : 0))
                printf("(the first %d shown: --limit N shows more)\n", PQntuples(r));
        PQclear(r);
        return 0;
}

static int done_has(const int64_t *done, size_t n, int64_t id)
{
        for (size_t i = 0; i < n; i++)
                if (done[i] == id)
                        return 1;
        return 0;
}

/* retry or drop; every ID named must have been a given-up row. */
static int touch(struct store *s, const struct config *cfg, const struct outbox_opts *o)
{
        const int retry = o->action == OUTBOX_RETRY;
        int64_t *done = NULL;
        size_t ndone = 0;
        char err[1024];
        int rc = 0;
        enum store_rc q = retry ? store_outbox_retry(s, cfg->namespace, o->all ? NULL : o->ids, o->nids, &done, &ndone,
                                                     err, sizeof(err))
                                : store_outbox_drop(s, cfg->namespace, o->all ? NULL : o->ids, o->nids, &done, &ndone,
                                                    err, sizeof(err));
        if (q) {
                fprintf(stderr, "dedupctl outbox: %s\n", err);
                return 2;
        }
        for (size_t i = 0; i < ndone; i++)
                printf("row %" PRId64 ": %s\n", done[i], retry ? "put back: the relay publishes it again" : "dropped");
        for (size_t i = 0; i < o->nids; i++)
                if (!done_has(done, ndone, o->ids[i])) {
                        fprintf(stderr, "dedupctl outbox %s: row %" PRId64 " is not a given-up row of namespace %s\n",
                                retry ? "retry" : "drop", o->ids[i], cfg->namespace);
                        rc = 1;
                }
        printf("%zu row(s) %s\n", ndone, retry ? "put back" : "dropped");
        free(done);
        return rc;
}

int outbox_run(const struct config *cfg, const struct outbox_opts *o)
{
        char err[1024];
        struct store *s = store_open(cfg->pg_conninfo, err, sizeof(err));
        int rc;
        if (!s) {
                fprintf(stderr, "dedupctl: %s\n", err);
                return 2;
        }
        rc = o->action == OUTBOX_LIST ? list(s, cfg, o) : touch(s, cfg, o);
        store_free(s);
        return rc;
}
