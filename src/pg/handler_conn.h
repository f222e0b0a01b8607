/* handler_conn: the connection the handler ABI hands a handler (host->conn, host->init_conn) — the store's, which only pg/ names. */
#ifndef DEDUPD_PG_HANDLER_CONN_H
#define DEDUPD_PG_HANDLER_CONN_H

#include <libpq-fe.h>

#include "dedupd/handler.h"

struct store;
struct dedupd_rows;

/** All pg/ reads of the host's contexts (core/host.h): each begins with
 *  this — the host table first (DEDUPD_HOST, dedupd/handler.h), then the
 *  store whose connection its handler is given, and the rows its statements
 *  returned during the current call (pg/handler_exec.h). */
struct store_handler_ctx {
        const struct dedupd_host *host;
        struct store *store;      /* NULL: no connection to give (the handler gets NULL) */
        struct dedupd_rows *rows; /* owned: freed by store_handler_release */
};

/** host->conn: the connection of ctx's store (in transactional mode inside
 *  the batch's transaction), NULL when not connected. */
PGconn *store_handler_conn(struct dedupd_ctx *ctx);
/** host->init_conn: the setup connection of ictx's store. */
PGconn *store_handler_init_conn(struct dedupd_init_ctx *ictx);

#endif
