/* rerun: dedupctl rerun — an operator's audited re-run of one key: run its effect once more, or emit its outbox again. */
#include "tools/rerun.h"

#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pg/reruns.h"
#include "pg/store.h"

#define REASON_MAX 1000

/* Who asks: --by, else the user sudo was run by, else the login. */
static const char *who(const char *by)
{
        const struct passwd *pw;
        if (by && *by)
                return by;
        if ((by = getenv("SUDO_USER")) && *by)
                return by;
        if ((by = getenv("USER")) && *by)
                return by;
        pw = getpwuid(getuid());
        return pw && pw->pw_name ? pw->pw_name : "unknown";
}

int rerun_parse(const char *key, const char *reason, const char *by, int emit_only, struct rerun_opts *o, char *err,
                size_t errsz)
{
        if (!reason || !*reason) {
                snprintf(err, errsz, "--reason TEXT is required: it is kept with the re-run, with who asked");
                return -1;
        }
        if (strlen(reason) > REASON_MAX) {
                snprintf(err, errsz, "--reason: at most %d bytes", REASON_MAX);
                return -1;
        }
        o->key = key;
        o->reason = reason;
        o->by = who(by);
        o->emit_only = emit_only;
        return 0;
}

/* What to do next for a key whose row went: its message has to come again. */
static void print_next(const struct rerun_opts *o, const struct rerun_info *in)
{
        printf("re-run %d of key %s (was %s) recorded: its row is gone, so the key's next delivery runs the "
               "handler once more\n",
               in->generation, o->key, in->status);
        if (in->topic[0] && in->offset >= 0)
                printf("its first message: %s partition %" PRId32 " offset %" PRId64 "; to deliver it again:\n"
                       "  dedupctl replay -c CONFIG -t %s --to-offset %" PRId64 " --partitions %" PRId32
                       "   (dedupd stopped; the records after it are absorbed)\n",
                       in->topic, in->partition, in->offset, in->topic, in->offset, in->partition);
}

int rerun_run(const struct config *cfg, const struct rerun_opts *o)
{
        char err[1024];
        struct store *s = store_open(cfg->pg_conninfo, err, sizeof(err));
        struct rerun_info in;
        enum rerun_result res;
        int rc = 0;
        if (!s) {
                fprintf(stderr, "dedupctl rerun: %s\n", err);
                return 2;
        }
        if (store_rerun(s, cfg->namespace, o->key, o->emit_only ? RERUN_EMIT_ONLY : RERUN_REEXECUTE, o->by, o->reason,
                        &res, &in, err, sizeof(err))) {
                fprintf(stderr, "dedupctl rerun: nothing changed: %s\n", err);
                store_free(s);
                return 2;
        }
        switch (res) {
        case RERUN_OK:
                if (o->emit_only)
                        printf("re-run %d of key %s (emit only) recorded: %d outbox row%s published again by the "
                               "relay, with the identity %s went out with\n",
                               in.generation, o->key, in.outbox_rows, in.outbox_rows == 1 ? "" : "s",
                               in.outbox_rows == 1 ? "it" : "they");
                else
                        print_next(o, &in);
                break;
        case RERUN_NOT_FOUND:
                fprintf(stderr,
                        "dedupctl rerun: key '%s' not found in namespace %s (a re-run may already await its next "
                        "delivery: dedupctl inspect shows it)\n",
                        o->key, cfg->namespace);
                rc = 1;
                break;
        case RERUN_IN_FLIGHT:
                fprintf(stderr,
                        "dedupctl rerun: key '%s' is PENDING: an owner runs it now, or it is in doubt (the reaper "
                        "marks it EXPIRED, reconcile() settles it); nothing changed\n",
                        o->key);
                rc = 1;
                break;
        case RERUN_NO_OUTBOX:
                fprintf(stderr,
                        "dedupctl rerun: key '%s' has no outbox row (it emitted none, or they were purged after "
                        "outbox.keep); nothing changed\n",
                        o->key);
                rc = 1;
                break;
        }
        store_free(s);
        return rc;
}
