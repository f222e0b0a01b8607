/* check: what `dedupctl check` does with a loaded config — handlers, key lint, the listen address, the broker's side, the database. */
#ifndef DEDUPD_TOOLS_CHECK_H
#define DEDUPD_TOOLS_CHECK_H

#include <stdio.h>

#include "base/config.h"

struct check_opts {
        int print;             /* every setting as in effect first (config_dump) */
        int offline;           /* ask neither the broker nor the database */
        int broker_timeout_ms; /* longest wait for the Kafka broker (TOPICS_CHECK_TIMEOUT_MS) */
        FILE *out;             /* what is fine: "topic t: key ...", "database ...: connected", "OK" */
        FILE *err;             /* problems and warnings, file:line:column: ... */
};

enum check_rc {
        CHECK_OK = 0,          /* warnings at most */
        CHECK_INVALID = 1,     /* something is wrong: every problem on err */
        CHECK_UNREACHABLE = 2, /* the broker or the database could not be asked */
};

/** Check cfg as dedupctl check does; every finding goes to o->out or o->err. */
enum check_rc check_run(const struct config *cfg, const struct check_opts *o);

#endif
