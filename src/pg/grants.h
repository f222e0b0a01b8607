/* grants: the GRANTs that let a role that owns nothing run dedupd — written by the server (format %I, ::regclass), never by concatenation here. */
#ifndef DEDUPD_PG_GRANTS_H
#define DEDUPD_PG_GRANTS_H

#include <stddef.h>

#include "pg/store.h"

/** The statements, one per element, in the order to run them. */
struct grants {
        char **sql;
        size_t cnt;
};

/**
 * What role needs on schema dedupd as it is now (run after `dedupctl
 * migrate`): USAGE on the schema, SELECT, INSERT, UPDATE, DELETE on each of
 * its tables but schema_migrations (SELECT only: the role reads the version
 * and never moves it), USAGE and SELECT on its sequences; then the same DML
 * on each of the handler's tables (names as regclass reads them: "account",
 * "app.ledger"), USAGE on its schema and on its serial or identity columns'
 * sequences. An unknown table is an error naming it.
 */
enum store_rc store_grants(struct store *s, const char *role, const char *const *tables, size_t ntables,
                           struct grants *out, char *err, size_t errsz) __attribute__((warn_unused_result));

/** Run them in one transaction: all or none. */
enum store_rc store_grants_apply(struct store *s, const struct grants *g, char *err, size_t errsz)
        __attribute__((warn_unused_result));

void grants_free(struct grants *g);

#endif
