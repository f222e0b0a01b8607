/* rows: a query's rows printed the way every dedupctl command prints them — a header, aligned columns, | between. */
#include "tools/rows.h"

#include <stdio.h>

void rows_print(PGresult *r)
{
        PQprintOpt po = {0};
        po.header = 1;
        po.align = 1;
        po.fieldSep = "|";
        PQprint(stdout, r, &po);
}
