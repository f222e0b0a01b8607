/* record: a message's bytes as every layer passes them — topic, key, value, headers. */
#ifndef DEDUPD_BASE_RECORD_H
#define DEDUPD_BASE_RECORD_H

#include <stddef.h>

#include "dedupd/handler.h"

/** A record as received or to publish. A NULL value is a null value (a
 *  tombstone); headers may be NULL; a NULL header value is a null header. */
struct record {
        const char *topic; /* NULL where the topic is implied (deriving a key) */
        const void *key;
        size_t key_len;
        const void *value;
        size_t value_len;
        const struct dedupd_header *headers;
        size_t header_cnt;
        /* The broker's own per-message properties, by name (AMQP's
         * message_id, correlation_id, ...): what {amqp:NAME} reads. */
        const struct dedupd_header *props;
        size_t prop_cnt;
        /* To publish: the message's identity, as the broker's own dedup id
         * where it has one (Nats-Msg-Id, AMQP message_id); NULL: none. */
        const char *msg_id;
};

#endif
