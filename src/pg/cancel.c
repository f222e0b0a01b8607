/* cancel: what cancels the statement running on a store's connection, from another thread (the watchdog's). */
#include "pg/cancel.h"

#include "base/mem.h"

#include <stdlib.h>

#include "pg/store.h"

struct store_cancel {
        PGcancel *pq; /* NULL: aimed at no connection */
};

struct store_cancel *store_cancel_new(void) { return xcalloc(1, sizeof(struct store_cancel)); }

void store_cancel_free(struct store_cancel *c)
{
        if (!c)
                return;
        PQfreeCancel(c->pq);
        free(c);
}

void store_cancel_aim(struct store_cancel *c, const struct store *s)
{
        PGconn *conn = store_conn(s);
        PQfreeCancel(c->pq);
        c->pq = conn ? PQgetCancel(conn) : NULL;
}

int store_cancel_send(struct store_cancel *c, char *err, size_t errsz)
{
        return c->pq && !PQcancel(c->pq, err, (int)errsz) ? -1 : 0;
}
