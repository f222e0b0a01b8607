/* destination: whether RabbitMQ could ever take a record dedupd writes to the outbox — an exchange name and a routing key that fit AMQP. */
#ifndef DEDUPD_SOURCE_RABBITMQ_DESTINATION_H
#define DEDUPD_SOURCE_RABBITMQ_DESTINATION_H

#include <stddef.h>

#include "base/record.h"

/** AMQP 0-9-1 short strings (exchange names, routing keys, header names)
 *  hold at most 255 bytes. */
#define RMQ_SHORTSTR_MAX 255

/** 0 when RabbitMQ could take rec: its topic an exchange name (UTF-8, 1 to
 *  255 bytes), its key a routing key of at most 255 bytes, its header
 *  names at most 255 bytes; else -1 and why (the sink's check). */
int rmq_record_check(void *opaque, const struct record *rec, char *why, size_t whysz);

#endif
