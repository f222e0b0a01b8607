/* lag: dedupctl verify's lag on RabbitMQ — no offsets to compare, so the messages ready per queue. */
#include "source/rabbitmq/lag.h"

#include <inttypes.h>
#include <stdio.h>

#include "source/rabbitmq/queues.h"

/* RabbitMQ has no offsets to compare: what is caught up is an empty queue
 * (its ready messages; the ones delivered and not yet acknowledged are not
 * counted). */
int rmq_lag(struct store *s, const struct config *cfg, FILE *out, int expect_caught_up, broker_finding_fn finding,
            void *opaque, char *err, size_t errsz)
{
        char line[512];
        (void)s;
        int64_t ready[cfg->topic_cnt ? cfg->topic_cnt : 1];
        fprintf(out, "\nlag: not measured (source: rabbitmq has no offsets); messages ready per queue instead\n");
        if (rmq_queues_depth(cfg, ready, err, errsz) != RMQ_CHECK_OK)
                return -1;
        for (size_t t = 0; t < cfg->topic_cnt; t++) {
                fprintf(out, "  %-24s %12" PRId64 " ready\n", cfg->topics[t].name, ready[t]);
                if (!expect_caught_up || ready[t] == 0)
                        continue;
                snprintf(line, sizeof(line), "lag: queue %s is not caught up: %" PRId64 " message(s) ready",
                         cfg->topics[t].name, ready[t]);
                finding(opaque, line);
        }
        return 0;
}
