/* version: what `dedupd --version` and `dedupctl --version` say — one text for both mains. */
#ifndef DEDUPD_VERSION_H
#define DEDUPD_VERSION_H

#include <stdio.h>

/**
 * Print program's version, the handler ABI it loads, every broker's client
 * library and libpq it runs with (their runtime versions, which may differ from the headers it
 * was built against) and whether fault points are compiled in.
 */
void version_print(FILE *fp, const char *program);

/** libpq's runtime version as PostgreSQL names its releases ("15.18", "9.6.24"). */
const char *version_libpq(char *buf, size_t size);

#endif
