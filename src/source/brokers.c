/* brokers: the table of brokers — one row each; a broker's folder holds the rest of it. */
#include "source/brokers.h"

#include <string.h>

#include "source/kafka/broker.h"
#include "source/nats/broker.h"
#include "source/rabbitmq/broker.h"
#ifdef DEDUPD_LOOPBACK
#include "source/loopback/broker.h"
#endif

static const struct broker *const table[] = {
        &kafka_broker, &rabbitmq_broker, &nats_broker,
#ifdef DEDUPD_LOOPBACK
        &loopback_broker, /* test builds only: the in-memory broker the runner's unit tests drive */
#endif
};

#define BROKERS (sizeof(table) / sizeof(*table))
_Static_assert(BROKERS <= CONFIG_BROKERS_MAX, "more brokers than CONFIG_BROKERS_MAX");

const struct broker *broker_at(size_t i) { return i < BROKERS ? table[i] : NULL; }

/* The configuration's view of the same table (base/config_impl.h). */
const struct config_broker *config_broker_at(size_t i) { return i < BROKERS ? table[i]->config : NULL; }

const struct broker *broker_of(const struct config *cfg) { return broker_at((size_t)cfg->source); }

const char *broker_versions(char *buf, size_t bufsz)
{
        size_t len = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < BROKERS && len < bufsz; i++) {
                char v[128];
                if (!table[i]->versions)
                        continue;
                len += (size_t)snprintf(buf + len, bufsz - len, "%s%s", len ? ", " : "",
                                        table[i]->versions(v, sizeof(v)));
        }
        return buf;
}
