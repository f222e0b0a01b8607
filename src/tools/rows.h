/* rows: a query's rows printed the way every dedupctl command prints them — a header, aligned columns, | between. */
#ifndef DEDUPD_TOOLS_ROWS_H
#define DEDUPD_TOOLS_ROWS_H

#include <libpq-fe.h>

/** r's rows to stdout. */
void rows_print(PGresult *r);

#endif
