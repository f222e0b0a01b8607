/* exchanges: which exchanges a publishing connection has found to exist — a passive declare on a channel of its own, remembered while the connection lives. */
#include "source/rabbitmq/exchanges.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "source/rabbitmq/connection.h"

/* Past this many names the list starts again: it is a cache, not a registry. */
#define KNOWN_MAX 256

static int known(const struct rmq_exchanges *x, const char *name)
{
        for (size_t i = 0; i < x->cnt; i++)
                if (!strcmp(x->names[i], name))
                        return 1;
        return 0;
}

static void remember(struct rmq_exchanges *x, const char *name)
{
        int open = x->channel_open;
        if (x->cnt == KNOWN_MAX)
                rmq_exchanges_forget(x);
        x->channel_open = open;
        x->names = xrealloc(x->names, (x->cnt + 1) * sizeof(*x->names));
        x->names[x->cnt++] = xstrdup(name);
}

void rmq_exchanges_forget(struct rmq_exchanges *x)
{
        for (size_t i = 0; i < x->cnt; i++)
                free(x->names[i]);
        free(x->names);
        *x = (struct rmq_exchanges){0};
}

/* The broker closed the checking channel: say close-ok, so it can be opened again. */
static int close_ok(struct rmq_exchanges *x, amqp_connection_state_t conn, amqp_channel_t ch)
{
        amqp_channel_close_ok_t ok = {0};
        x->channel_open = 0;
        return amqp_send_method(conn, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) == AMQP_STATUS_OK ? 0 : -1;
}

int rmq_exchange_exists(struct rmq_exchanges *x, amqp_connection_state_t conn, amqp_channel_t ch, const char *name,
                        char *why, size_t whysz)
{
        char what[300];
        int code = 0;
        if (!*name || known(x, name))
                return 1;
        if (strlen(name) > 255) {
                snprintf(why, whysz, "exchange name of %zu bytes: AMQP allows at most 255", strlen(name));
                return 0;
        }
        if (!x->channel_open) {
                if (rmq_channel_open(conn, ch, why, whysz))
                        return -1;
                x->channel_open = 1;
        }
        amqp_exchange_declare(conn, ch, amqp_cstring_bytes(name), amqp_cstring_bytes("direct"), 1 /* passive */, 0, 0,
                              0, amqp_empty_table);
        snprintf(what, sizeof(what), "exchange '%.255s' (passive exchange.declare)", name);
        if (!rmq_check(conn, what, &code, why, whysz)) {
                remember(x, name);
                return 1;
        }
        amqp_rpc_reply_t r = amqp_get_rpc_reply(conn);
        int channel_closed = r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD;
        if (channel_closed && close_ok(x, conn, ch))
                return -1;
        if (channel_closed && code == AMQP_NOT_FOUND) {
                snprintf(why, whysz, "exchange '%.200s' does not exist (404 NOT_FOUND)", name);
                return 0;
        }
        return channel_closed ? 0 : -1; /* refused otherwise (403 ...: why says so), or the connection failed */
}
