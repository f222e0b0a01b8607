/* destination: whether RabbitMQ could ever take a record dedupd writes to the outbox — an exchange name and a routing key that fit AMQP. */
#include "source/rabbitmq/destination.h"

#include <stdio.h>
#include <string.h>

#include "base/utf8.h"

int rmq_record_check(void *opaque, const struct record *rec, char *why, size_t whysz)
{
        size_t n = rec->topic ? strlen(rec->topic) : 0;
        (void)opaque;
        if (!n || n > RMQ_SHORTSTR_MAX || !utf8_text_ok(rec->topic, n)) {
                snprintf(why, whysz, "an exchange name is UTF-8 text of 1 to %d bytes (this one: %zu)",
                         RMQ_SHORTSTR_MAX, n);
                return -1;
        }
        if (rec->key && rec->key_len > RMQ_SHORTSTR_MAX) {
                snprintf(why, whysz, "a routing key (the record's key) holds at most %d bytes, not %zu",
                         RMQ_SHORTSTR_MAX, rec->key_len);
                return -1;
        }
        for (size_t i = 0; i < rec->header_cnt; i++)
                if (strlen(rec->headers[i].name) > RMQ_SHORTSTR_MAX) {
                        snprintf(why, whysz, "a header name holds at most %d bytes", RMQ_SHORTSTR_MAX);
                        return -1;
                }
        return 0;
}
