/* dupes: dedupctl dupes — where the absorbed duplicates of a namespace come from, from the sample dedupd records (provenance). */
#ifndef DEDUPD_TOOLS_DUPES_H
#define DEDUPD_TOOLS_DUPES_H

#include <stdint.h>

#include "base/config.h"

/** What dedupctl dupes was asked. */
struct dupes_opts {
        int64_t since_ms;  /* epoch ms */
        const char *topic; /* NULL: every topic */
        int limit;         /* rows per table */
};

/** --since (a time, or a duration: that long ago; default 24h), --limit
 *  (default 10), --topic: 0, or -1 with why (bad usage: exit 2). */
int dupes_parse(const char *since, const char *limit, const char *topic, struct dupes_opts *o, char *err, size_t errsz);

/** Print the report; the exit code: 0, 1 when nothing was sampled since
 *  then (with why that may be), 2 the database cannot be used. */
int dupes_run(const struct config *cfg, const struct dupes_opts *o);

#endif
