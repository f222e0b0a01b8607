/* handler_schema: a handler's tables created once (host->ensure_schema) — probed, and created under an advisory lock only when missing. */
#ifndef DEDUPD_PG_HANDLER_SCHEMA_H
#define DEDUPD_PG_HANDLER_SCHEMA_H

#include <stddef.h>

struct store;

/** probe (one row, first column true: the schema is there) on s; when it
 *  fails, in one transaction under the advisory lock of "dedupd.schema:"
 *  name: probe again, run ddl, and the probe must pass. 0, or -1 with why. */
int store_handler_ensure_schema(struct store *s, const char *name, const char *ddl, const char *probe, char *err,
                                size_t errsz) __attribute__((warn_unused_result));

#endif
