/* connection: the one place AMQP connections are opened from the config — the URL, TLS, login, heartbeat, and what a broker's refusal says. */
#ifndef DEDUPD_SOURCE_RABBITMQ_CONNECTION_H
#define DEDUPD_SOURCE_RABBITMQ_CONNECTION_H

#include <stddef.h>

#include <amqp.h>

#include "base/config.h"

/** How long opening a connection or one RPC may take. */
#define RMQ_TIMEOUT_MS 10000

/** "host:port vhost /" of rabbitmq.url, without the user or the password:
 *  what every "cannot reach the broker" message names. */
const char *rmq_target(const struct config *cfg, char *buf, size_t bufsz);

/** The vhost rabbitmq.url names ("/" by default), into buf. */
const char *rmq_vhost(const struct config *cfg, char *buf, size_t bufsz);

/** 0 when url parses as amqp:// or amqps://, else -1 with why. */
int rmq_url_check(const char *url, char *err, size_t errsz);

/**
 * A logged-in connection to rabbitmq.url (TLS for amqps://, verified against
 * rabbitmq.ca_file when set) with heartbeat_s (0: none). NULL with the
 * reason in err; the password is never in it.
 */
amqp_connection_state_t rmq_connect(const struct config *cfg, int heartbeat_s, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** Close politely and free (NULL is fine). */
void rmq_disconnect(amqp_connection_state_t conn);

/** Open channel ch. 0, or -1 with the broker's reason. */
int rmq_channel_open(amqp_connection_state_t conn, amqp_channel_t ch, char *err, size_t errsz);

/**
 * What an RPC reply says, into err, prefixed with what was asked. Returns 0
 * for a normal reply, else -1. *code (may be NULL) gets the broker's reply
 * code (404 not found, 406 precondition failed, ...) or 0.
 */
int rmq_reply(amqp_rpc_reply_t r, const char *what, int *code, char *err, size_t errsz);

/** The last RPC's reply on conn, as rmq_reply. */
int rmq_check(amqp_connection_state_t conn, const char *what, int *code, char *err, size_t errsz);

/** NUL-terminated copy of AMQP bytes, into buf (cut to fit). */
const char *rmq_str(amqp_bytes_t b, char *buf, size_t bufsz);

#endif
