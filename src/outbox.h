/* outbox: messages written in the handler's transaction, published by a relay after COMMIT. */
#ifndef DEDUPD_OUTBOX_H
#define DEDUPD_OUTBOX_H

#include <stddef.h>

#include <libpq-fe.h>

#include "dedupd/handler.h"
#include "store.h"

struct producer;

/**
 * Write one message to dedupd.outbox on conn, inside the caller's
 * transaction: it will exist if and only if that transaction commits.
 */
int outbox_insert(PGconn *conn, const char *ns, const char *idem_key, const char *topic,
                  const void *key, size_t key_len, const void *value, size_t value_len,
                  const struct dedupd_header *headers, size_t header_cnt, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/**
 * Publish up to `batch` unsent rows of the namespace, oldest first, and mark
 * them sent only after the broker acknowledged them. Rows are locked with
 * SKIP LOCKED, so several relays share the work. Returns the number
 * published, or -1 (rows stay unsent; the next round retries them).
 */
int outbox_relay(struct store *s, struct producer *p, const char *ns, int batch, char *err,
                 size_t errsz);

#endif
