/* handler_conn: the connection the handler ABI hands a handler (host->conn, host->init_conn) — the store's, which only pg/ names. */
#include "pg/handler_conn.h"

#include "pg/store.h"

/* A context begins with its store_handler_ctx: a pointer to it is one to that. */
static PGconn *conn_of(const void *ctx)
{
        const struct store_handler_ctx *h = ctx;
        return h->store ? store_conn(h->store) : NULL;
}

PGconn *store_handler_conn(struct dedupd_ctx *ctx) { return conn_of(ctx); }

PGconn *store_handler_init_conn(struct dedupd_init_ctx *ictx) { return conn_of(ictx); }
