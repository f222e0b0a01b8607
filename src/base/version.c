/* version: what `dedupd --version` and `dedupctl --version` say — one text for both mains. */
#include "base/version.h"

#include <librdkafka/rdkafka.h>
#include <libpq-fe.h>

#include "dedupd/handler.h"

/* PQlibVersion() is 150005 for 15.5 and 90624 for 9.6.24: print it the way
 * PostgreSQL names its releases. */
static void print_libpq_version(FILE *fp, int v)
{
        if (v >= 100000)
                fprintf(fp, "%d.%d", v / 10000, v % 10000);
        else
                fprintf(fp, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

void version_print(FILE *fp, const char *program)
{
        fprintf(fp, "%s %s (handler ABI %d)\n", program, DEDUPD_VERSION, DEDUPD_HANDLER_ABI_MAJOR);
        fprintf(fp, "librdkafka %s, libpq ", rd_kafka_version_str());
        print_libpq_version(fp, PQlibVersion());
        fputc('\n', fp);
        /* Said so a user can tell a test build from the one to run in production. */
#ifdef DEDUPD_FAULT_POINTS
        fprintf(fp, "fault points: compiled in (a test build: DEDUPD_FAULT=NAME:N:kill ends dedupd at that point)\n");
#else
        fprintf(fp, "fault points: none (DEDUPD_FAULT is ignored)\n");
#endif
}
