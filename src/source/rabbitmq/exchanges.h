/* exchanges: which exchanges a publishing connection has found to exist — a passive declare on a channel of its own, remembered while the connection lives. */
#ifndef DEDUPD_SOURCE_RABBITMQ_EXCHANGES_H
#define DEDUPD_SOURCE_RABBITMQ_EXCHANGES_H

#include <stddef.h>

#include <amqp.h>

/** The exchanges found on one connection; zero-initialised. */
struct rmq_exchanges {
        char **names;
        size_t cnt;
        int channel_open; /* the checking channel is open */
};

/**
 * Whether exchange name exists: "" (the default exchange) and a name found
 * before on this connection at once, else a passive exchange.declare on
 * channel ch (a refusal closes only that channel, which is closed-ok'd and
 * opened again next time). 1 it exists; 0 it does not, or its name is not
 * one (why says so); -1 the connection failed (why): drop it and call
 * rmq_exchanges_forget.
 */
int rmq_exchange_exists(struct rmq_exchanges *x, amqp_connection_state_t conn, amqp_channel_t ch, const char *name,
                        char *why, size_t whysz);

/** The connection is gone: nothing found on it holds any more. */
void rmq_exchanges_forget(struct rmq_exchanges *x);

#endif
