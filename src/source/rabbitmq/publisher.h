/* publisher: the confirmed publisher — dead letters, replies and the outbox handed back only once the broker confirmed them. */
#ifndef DEDUPD_SOURCE_RABBITMQ_PUBLISHER_H
#define DEDUPD_SOURCE_RABBITMQ_PUBLISHER_H

#include <stddef.h>

#include "base/config.h"
#include "core/source.h"

struct rmq_publisher;

/** Connects on first use, on its own connection (a consumer's deliveries
 *  and a publisher's confirms do not share one). */
struct rmq_publisher *rmq_publisher_new(const struct config *cfg);
void rmq_publisher_free(struct rmq_publisher *p);

/** The source whose deliveries dead_letter rejects when
 *  rabbitmq.dead_letter.exchange is empty. */
void rmq_publisher_attach(struct rmq_publisher *p, struct source *src);

/**
 * The publisher as the protocol's sink. publish: each record to the
 * exchange named by its topic, routing key its key, headers as AMQP
 * headers, persistent, mandatory, confirmed within
 * outbox.publish_timeout_ms, each answered on its own: a routing key or
 * header name over 255 bytes, an exchange that does not exist (passive
 * declare, on a channel of its own) fail that record before anything is
 * sent; an unroutable record (basic.return) or a nack fail that one; a
 * closed connection or a missing confirm leave the rest unsent.
 * dead_letter: with rabbitmq.dead_letter.exchange, each message unchanged
 * (body and properties) plus dedupd.* headers to that exchange, routing key
 * the topic's dead_letter.topic, 0 only once every one is confirmed;
 * without, basic.reject requeue=false.
 */
struct sink rmq_publisher_sink(struct rmq_publisher *p);

#endif
