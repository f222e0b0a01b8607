/* relay: publishes what committed batches wrote to the outbox, and marks each row sent only once the broker has it. */
#ifndef DEDUPD_CORE_RELAY_H
#define DEDUPD_CORE_RELAY_H

#include <stddef.h>

#include "core/source.h"
#include "pg/store.h"

/**
 * Publish up to `batch` unsent rows of the namespace, oldest first, and mark
 * them sent only after the broker acknowledged them. Rows are locked with
 * SKIP LOCKED, so several relays share the work. Each carries
 * dedupd.outbox.id (and dedupd.key): a crash after the broker acknowledged
 * and before the mark publishes it again. Returns the number published, or
 * -1 (rows stay unsent; the next round retries them).
 */
int relay_run(struct store *s, const struct sink *sink, const char *ns, int batch, char *err, size_t errsz);

#endif
