/* instance: this process as the crash-loop ledger knows it — its owner id and the liveness lease it keeps in dedupd.instances. */
#ifndef DEDUPD_CORE_INSTANCE_H
#define DEDUPD_CORE_INSTANCE_H

#include <stdint.h>

#include "base/config.h"
#include "pg/store.h"

/*
 * Every row this process writes to the crash-loop ledger carries its owner
 * id, and a row left by an instance that is still live is a peer's
 * unfinished batch, never a crash (pg/instances.h says what live means).
 * The lease outlasts the longest a live process goes without renewing it:
 * a batch, which the watchdog ends by batch.timeout_ms + max(timeout / 2,
 * 2 s), and one turn of housekeeping. Hence 2 x the longest
 * topics[].batch.timeout_ms + 30 s (90 s by default), the bound dedupd
 * already puts on an idle transaction.
 */

/** This process's owner id, "hostname:pid:random", made once (external
 *  mode's leases use the same id). */
const char *instance_owner(void);

/** The lease for cfg, in milliseconds. */
int64_t instance_lease_ms(const struct config *cfg);

/** Before this process writes to the ledger: registered from the store's
 *  current session (a round trip only the first time and after a
 *  reconnection). 0, or -1 with err. */
int instance_ensure(struct store *s, const struct config *cfg, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** Between batches: renews the lease every sixth of its length, or at once
 *  after a reconnection. Failures are logged; the next turn tries again. */
void instance_tick(struct store *s, const struct config *cfg, int64_t now_ms);

/** A clean stop: this process is no longer an instance. */
void instance_leave(struct store *s);

#endif
