/* outbox: dedupctl outbox — the rows the relay gave up (and those still waiting), put back for the relay, or dropped. */
#ifndef DEDUPD_TOOLS_OUTBOX_H
#define DEDUPD_TOOLS_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

enum outbox_action { OUTBOX_LIST, OUTBOX_RETRY, OUTBOX_DROP };

/** What dedupctl outbox was asked, as parsed by outbox_parse. */
struct outbox_opts {
        enum outbox_action action;
        int all;      /* retry, drop: every given-up row */
        int unsent;   /* list: the waiting rows too */
        int limit;    /* list: at most this many rows */
        int64_t *ids; /* retry, drop: these rows */
        size_t nids;
};

/** The words after `outbox` (ACTION [ID...]) and its options, checked
 *  before the config is read. 0, or -1 with why (bad usage: exit 2). */
int outbox_parse(int argc, char *const *argv, int all, int unsent, const char *limit, struct outbox_opts *o, char *err,
                 size_t errsz);
void outbox_opts_free(struct outbox_opts *o);

/** Run it against the config's namespace; the exit code: 0, 1 when an ID
 *  named was not a given-up row, 2 when the database cannot be used. */
int outbox_run(const struct config *cfg, const struct outbox_opts *o);

#endif
