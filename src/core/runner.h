/* runner: the daemon's loop — buffers what the source delivers, runs each topic's due batch, acknowledges after COMMIT, decides what fetches. */
#ifndef DEDUPD_CORE_RUNNER_H
#define DEDUPD_CORE_RUNNER_H

#include <signal.h>
#include <stddef.h>

#include "base/config.h"
#include "core/pipeline.h"
#include "core/source.h"
#include "pg/store.h"

struct runner;

/** A runner for the pipeline (its lanes: one runs in the loop, more each on
 *  a thread); sink publishes the outbox after COMMIT. NULL with why in err
 *  when a worker's thread cannot start. */
struct runner *runner_new(const struct config *cfg, struct store *store, struct pipeline *pl, struct sink sink,
                          char *err, size_t errsz);
void runner_free(struct runner *r);

/** What the source must tell this runner (assignments, revocations). */
struct source_events runner_events(struct runner *r);

/** Between batches, when *flag is set: clear it and call cb (SIGHUP's reload). */
void runner_on_reload(struct runner *r, volatile sig_atomic_t *flag, void (*cb)(void *opaque), void *opaque);

/**
 * Run on src until *stop becomes non-zero. The batch in flight is finished
 * (or rolled back), committed work is acknowledged, the source is closed.
 * Returns 0 on a clean stop, -1 when the source failed (message in err).
 */
int runner_run(struct runner *r, struct source *src, volatile sig_atomic_t *stop, char *err, size_t errsz);

#endif
