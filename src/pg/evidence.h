/* evidence: where each topic's handler counts its effects (host->set_evidence) — declared at init into dedupd.evidence, read and checked by dedupctl verify. */
#ifndef DEDUPD_PG_EVIDENCE_H
#define DEDUPD_PG_EVIDENCE_H

#include <stddef.h>

#include "pg/store.h"

/** 0 when table ("t" or "schema.t") and column are plain SQL identifiers
 *  (letters, digits, _ and $, not starting with a digit, at most 63 bytes
 *  each); -1 with what is wrong. Checked where they are declared and again
 *  where they are read: the table is also the handler's, not only dedupd's. */
int store_evidence_names_ok(const char *table, const char *column, char *err, size_t errsz);

/** Record what topic's handler declared (namespace ns), replacing what it
 *  declared before. */
enum store_rc store_evidence_declare(struct store *s, const char *ns, const char *topic, const char *handler,
                                     const char *table, const char *column, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** What topic's handler declared: *handler, *table and *column (free them),
 *  NULL when nothing (or no dedupd.evidence yet: a schema before migration 12). */
enum store_rc store_evidence_declared(struct store *s, const char *ns, const char *topic, char **handler, char **table,
                                      char **column, char *err, size_t errsz) __attribute__((warn_unused_result));

/** 1 in *table_ok when table exists, in *column_ok when it has column. */
enum store_rc store_evidence_exists(struct store *s, const char *table, const char *column, int *table_ok,
                                    int *column_ok, char *err, size_t errsz) __attribute__((warn_unused_result));

/** table quoted as SQL ("a"."b" for a.b), NULL when it cannot be; PQfreemem-free: free() it. */
char *store_evidence_quote(struct store *s, const char *name);

#endif
