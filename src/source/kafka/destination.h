/* destination: whether Kafka could ever take a record dedupd writes to the outbox — a legal topic name. */
#ifndef DEDUPD_SOURCE_KAFKA_DESTINATION_H
#define DEDUPD_SOURCE_KAFKA_DESTINATION_H

#include <stddef.h>

#include "base/record.h"

/** Longest topic name Kafka accepts. */
#define KAFKA_TOPIC_MAX 249

/** 0 when rec's topic is a legal Kafka topic name (1 to 249 of
 *  [A-Za-z0-9._-], not "." or "..") and not an internal one (__...), else
 *  -1 and why (the sink's check). */
int kafka_record_check(void *opaque, const struct record *rec, char *why, size_t whysz);

#endif
