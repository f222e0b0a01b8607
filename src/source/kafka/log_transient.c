/* log_transient: librdkafka log lines that only say a fresh broker is still starting up. */
#include "source/kafka/log_transient.h"

#include <string.h>

int kafka_log_transient(const char *line, int64_t ms_since_start)
{
        /* A broker that has just started loads its transaction coordinator
         * before it hands out producer ids; librdkafka retries until it does. */
        return ms_since_start >= 0 && ms_since_start < KAFKA_LOG_TRANSIENT_MS && strstr(line, "idempotence PID") &&
               strstr(line, "Coordinator load in progress");
}
