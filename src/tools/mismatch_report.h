/* mismatch_report: the fingerprint mismatches of a namespace, as verify and stats print them. */
#ifndef DEDUPD_TOOLS_MISMATCH_REPORT_H
#define DEDUPD_TOOLS_MISMATCH_REPORT_H

#include <stddef.h>

#include "pg/store.h"

/** How many examples the report lists (the newest). */
#define MISMATCH_EXAMPLES 5

/** Prints how many records of the namespace carried a known key with another
 *  payload, and the newest few with their origin; -1 with err. */
int mismatch_report(struct store *s, const char *ns, char *err, size_t errsz);

#endif
