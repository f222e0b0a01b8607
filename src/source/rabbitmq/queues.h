/* queues: what the broker says of the queues and exchange dedupd uses — every queue exists, the dead-letter exchange exists, where dead letters go. */
#ifndef DEDUPD_SOURCE_RABBITMQ_QUEUES_H
#define DEDUPD_SOURCE_RABBITMQ_QUEUES_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

enum rmq_check_rc {
        RMQ_CHECK_OK = 0,
        RMQ_CHECK_INVALID,     /* a queue or the exchange is missing: err names it */
        RMQ_CHECK_UNREACHABLE, /* no broker answered (or refused the login): err says why */
};

/**
 * Every consumed queue exists (passive queue.declare: its ready messages and
 * consumers are logged at info when log is set) and so does
 * rabbitmq.dead_letter.exchange when set (passive exchange.declare), and
 * each retention class keeps keys as long as its queue keeps messages
 * (rmq_queues_retention). The first problem in err.
 */
enum rmq_check_rc rmq_queues_check(const struct config *cfg, int log, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/**
 * Each topic's retention class against its queue's message TTL (the smaller
 * of x-message-ttl and the effective policy's message-ttl; neither: for
 * ever), read from the management HTTP API at url (https: verified against
 * rabbitmq.ca_file, the broker's CA, or the system's): RMQ_CHECK_INVALID with
 * the first class shorter, unless allow_shorter_than_topic. Without a url, or
 * when the API does not answer, each class is said (WARN) not to be checked.
 * rmq_queues_check runs it.
 */
enum rmq_check_rc rmq_queues_retention(const struct config *cfg, const char *url, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/**
 * Messages ready in each consumed queue (passive queue.declare: delivered
 * but unacknowledged ones are not counted), into ready[cfg->topic_cnt].
 */
enum rmq_check_rc rmq_queues_depth(const struct config *cfg, int64_t *ready, char *err, size_t errsz)
        __attribute__((warn_unused_result));

#endif
