/* version: what `dedupd --version` and `dedupctl --version` say — one text for both mains. */
#include "ops/version.h"

#include <libpq-fe.h>

#include "dedupd/handler.h"
#include "source/brokers.h"

/* PQlibVersion() is 150005 for 15.5 and 90624 for 9.6.24. */
const char *version_libpq(char *buf, size_t size)
{
        int v = PQlibVersion();
        if (v >= 100000)
                snprintf(buf, size, "%d.%d", v / 10000, v % 10000);
        else
                snprintf(buf, size, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
        return buf;
}

void version_print(FILE *fp, const char *program)
{
        char pq[32], brokers[512];
        fprintf(fp, "%s %s (handler ABI %d)\n", program, DEDUPD_VERSION, DEDUPD_HANDLER_ABI_MAJOR);
        fprintf(fp, "%s\n", broker_versions(brokers, sizeof(brokers)));
        fprintf(fp, "libpq %s\n", version_libpq(pq, sizeof(pq)));
        /* Said so a user can tell a test build from the one to run in production. */
#ifdef DEDUPD_FAULT_POINTS
        fprintf(fp, "fault points: compiled in (a test build: DEDUPD_FAULT=NAME:N:kill ends dedupd at that point)\n");
#else
        fprintf(fp, "fault points: none (DEDUPD_FAULT is ignored)\n");
#endif
}
