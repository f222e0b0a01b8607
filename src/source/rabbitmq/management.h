/* management: the RabbitMQ management plugin's HTTP API, for what AMQP does not show — a queue's message TTL, from its arguments and its effective policy. */
#ifndef DEDUPD_SOURCE_RABBITMQ_MANAGEMENT_H
#define DEDUPD_SOURCE_RABBITMQ_MANAGEMENT_H

#include <stddef.h>
#include <stdint.h>

/** How long one answer of the management API may take. */
#define RMQ_MANAGEMENT_TIMEOUT_MS 5000

/** How long a queue keeps messages, and where that comes from. */
struct rmq_queue_ttl {
        int64_t ms;     /* -1: no message TTL, messages are kept for ever */
        char said[200]; /* in the broker's words: "x-message-ttl=3600000", "no message TTL: ..." */
};

/**
 * The message TTL of queue in vhost, as the management HTTP API at url says
 * (http[s]://user:password@host:port[/path_prefix], the plugin's listener;
 * https verified against ca_file, NULL or "": the system's CAs; the user
 * needs the monitoring, management or administrator tag): the
 * smaller of the queue's x-message-ttl argument and its effective policy's
 * message-ttl (the broker merges a policy and an operator policy into that).
 * The API's view of policies is its statistics', a few seconds behind a
 * change. 0, or -1 with why in err (never the password).
 */
int rmq_queue_retention_ms(const char *url, const char *ca_file, const char *vhost, const char *queue,
                           struct rmq_queue_ttl *ttl, char *err, size_t errsz) __attribute__((warn_unused_result));

#endif
