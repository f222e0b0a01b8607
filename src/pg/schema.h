/* schema: the numbered migrations that create and change schema dedupd, applied at start and by dedupctl migrate. */
#ifndef DEDUPD_PG_SCHEMA_H
#define DEDUPD_PG_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "pg/store.h"

/** Apply the numbered schema migrations not yet applied (idempotent,
 *  serialised by an advisory lock so concurrent starters are safe). */
enum store_rc store_migrate(struct store *s, char *err, size_t errsz) __attribute__((warn_unused_result));
/** Highest applied and highest known migration. */
int store_schema_version(struct store *s, int *applied, int *known, char *err, size_t errsz);

/** Compare schema dedupd as the database has it with the description the
 *  migrations are meant to build (pg/schema.c): *differences and, in
 *  report, each column missing, not described, or of another type. */
enum store_rc store_schema_check(struct store *s, int *differences, char *report, size_t reportsz, char *err,
                                 size_t errsz) __attribute__((warn_unused_result));

#endif
