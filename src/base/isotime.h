/* isotime: a point in time as an operator writes it — ISO-8601 with a zone, or epoch milliseconds. */
#ifndef DEDUPD_BASE_ISOTIME_H
#define DEDUPD_BASE_ISOTIME_H

#include <stddef.h>
#include <stdint.h>

/** "2026-11-29T20:00:00Z", "2026-11-29T21:00:00.5+01:00" or epoch milliseconds (12 to 15
 *  digits: fewer are refused, they would be seconds) into *ms. 0, or -1 with why. */
int isotime_parse(const char *s, int64_t *ms, char *err, size_t errsz);

#endif
