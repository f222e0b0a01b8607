/* destination: whether Kafka could ever take a record dedupd writes to the outbox — a legal topic name. */
#include "source/kafka/destination.h"

#include <stdio.h>
#include <string.h>

int kafka_record_check(void *opaque, const struct record *rec, char *why, size_t whysz)
{
        const char *t = rec->topic;
        size_t n = t ? strlen(t) : 0;
        (void)opaque;
        if (!n || n > KAFKA_TOPIC_MAX) {
                snprintf(why, whysz, "a Kafka topic name has 1 to %d characters, not %zu", KAFKA_TOPIC_MAX, n);
                return -1;
        }
        if (strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n) {
                snprintf(why, whysz, "a Kafka topic name holds only letters, digits, '.', '_' and '-'");
                return -1;
        }
        if (!strncmp(t, "__", 2)) {
                snprintf(why, whysz, "'%s' is one of Kafka's internal topics (a name beginning with __)", t);
                return -1;
        }
        if (!strcmp(t, ".") || !strcmp(t, "..")) {
                snprintf(why, whysz, "'%s' is not a legal Kafka topic name", t);
                return -1;
        }
        return 0;
}
