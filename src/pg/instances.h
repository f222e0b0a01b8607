/* instances: dedupd.instances — each running dedupd's owner id and liveness lease, and what "live" means to the crash-loop ledger. */
#ifndef DEDUPD_PG_INSTANCES_H
#define DEDUPD_PG_INSTANCES_H

#include <stddef.h>
#include <stdint.h>

#include "pg/store.h"

/*
 * An instance is live while both hold: its lease (lease_until, renewed
 * between batches) has not run out, and the database session it registered
 * from still exists. A process that dies — a crash, kill -9, the watchdog's
 * exit — loses its session at once (the kernel closes its socket), so its
 * successor or a peer sees it dead right away; the lease covers what leaves
 * a session behind (a host that vanished, a network cut, a stopped process).
 * SQL for "the instance owning column OWNER is live", to be spliced into the
 * ledger's statements (a constant: no value is ever spliced). backend_start
 * tells a session from a later one that got its pid; where it cannot be read
 * (another role's session, without pg_read_all_stats) the pid alone decides.
 * An instance behind a connection pooler has no session of its own
 * (backend_pid 0): its lease alone decides.
 */
#define STORE_INSTANCE_LIVE(owner)                                                                                     \
        "EXISTS (SELECT 1 FROM dedupd.instances i LEFT JOIN pg_catalog.pg_stat_activity s ON s.pid = i.backend_pid"    \
        " WHERE i.owner = " owner " AND i.lease_until > now()"                                                         \
        " AND (i.backend_pid = 0 OR s.pid IS NOT NULL AND coalesce(s.backend_start = i.backend_start, true)))"

/** Register owner (or renew its lease) from this session: lease_until =
 *  now() + lease_ms by the database's clock, this session's backend (0
 *  behind a pooler). Also forgets instances whose lease ran out more than
 *  an hour ago. */
enum store_rc store_instance_register(struct store *s, const char *owner, const char *ns, int64_t lease_ms, char *err,
                                      size_t errsz) __attribute__((warn_unused_result));
/** A clean stop: owner is no longer an instance. */
enum store_rc store_instance_leave(struct store *s, const char *owner, char *err, size_t errsz)
        __attribute__((warn_unused_result));

#endif
