/* rerun: dedupctl rerun — an operator's audited re-run of one key: run its effect once more, or emit its outbox again. */
#ifndef DEDUPD_TOOLS_RERUN_H
#define DEDUPD_TOOLS_RERUN_H

#include "base/config.h"

/** What dedupctl rerun was asked. */
struct rerun_opts {
        const char *key;
        const char *reason; /* required, not empty */
        const char *by;     /* --by, else $SUDO_USER, $USER, the login name */
        int emit_only;
};

/** The options checked before the config is read. 0, or -1 with why (bad usage: exit 2). */
int rerun_parse(const char *key, const char *reason, const char *by, int emit_only, struct rerun_opts *o, char *err,
                size_t errsz);

/** Run it against the config's namespace; the exit code: 0 done, 1 refused (no such key, PENDING, nothing
 *  to emit), 2 the database cannot be used. */
int rerun_run(const struct config *cfg, const struct rerun_opts *o);

#endif
