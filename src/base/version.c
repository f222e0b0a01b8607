/* version: what `dedupd --version` and `dedupctl --version` say — one text for both mains. */
#include "base/version.h"

#include <amqp.h>
#include <librdkafka/rdkafka.h>
#include <nats/nats.h>
#include <libpq-fe.h>

#include "dedupd/handler.h"

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
        char pq[32];
        fprintf(fp, "%s %s (handler ABI %d)\n", program, DEDUPD_VERSION, DEDUPD_HANDLER_ABI_MAJOR);
        fprintf(fp, "librdkafka %s, libpq %s\n", rd_kafka_version_str(), version_libpq(pq, sizeof(pq)));
        fprintf(fp, "librabbitmq %s, nats.c %s\n", amqp_version(), nats_GetVersion());
        /* Said so a user can tell a test build from the one to run in production. */
#ifdef DEDUPD_FAULT_POINTS
        fprintf(fp, "fault points: compiled in (a test build: DEDUPD_FAULT=NAME:N:kill ends dedupd at that point)\n");
#else
        fprintf(fp, "fault points: none (DEDUPD_FAULT is ignored)\n");
#endif
}
