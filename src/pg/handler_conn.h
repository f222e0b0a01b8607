/* handler_conn: the connection the handler ABI hands a handler (host->conn, host->init_conn) — the store's, which only pg/ names. */
#ifndef DEDUPD_PG_HANDLER_CONN_H
#define DEDUPD_PG_HANDLER_CONN_H

#include <libpq-fe.h>

struct store;
struct dedupd_ctx;
struct dedupd_init_ctx;

/** All pg/ reads of the host's contexts (core/host.h): each begins with
 *  this, the store whose connection its handler is given. */
struct store_handler_ctx {
        struct store *store; /* NULL: no connection to give (the handler gets NULL) */
};

/** host->conn: the connection of ctx's store (in transactional mode inside
 *  the batch's transaction), NULL when not connected. */
PGconn *store_handler_conn(struct dedupd_ctx *ctx);
/** host->init_conn: the setup connection of ictx's store. */
PGconn *store_handler_init_conn(struct dedupd_init_ctx *ictx);

#endif
