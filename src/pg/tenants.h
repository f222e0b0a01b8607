/* tenants: each tenant's live keys (dedupd.tenant_usage) — read for a quota, added in the batch's transaction, taken back where keys are deleted. */
#ifndef DEDUPD_PG_TENANTS_H
#define DEDUPD_PG_TENANTS_H

#include <stddef.h>
#include <stdint.h>

#include "pg/store.h"

/**
 * A CTE named tenant_released that takes back, in dedupd.tenant_usage, the
 * keys the data-modifying CTE named D deleted (D returns namespace,
 * idem_key, topic, partition). A tenant's key is "tenant:...": only topics
 * with tenants have usage rows, so other keys change nothing. Every
 * statement that deletes keys uses it: purge, dedupctl rerun, on_failed.
 */
#define TENANT_RELEASE(D)                                                                                              \
        " tenant_released AS (UPDATE dedupd.tenant_usage u SET live = u.live - c.n, updated_at = now() FROM"           \
        " (SELECT namespace, topic, partition, split_part(idem_key, ':', 1) AS tenant, count(*) AS n FROM " D          \
        " GROUP BY 1, 2, 3, 4) c WHERE u.namespace = c.namespace AND u.topic = c.topic"                                \
        " AND u.partition = c.partition AND u.tenant = c.tenant)"

/** live[i]: tenants[i]'s live keys in topic (0 without a row), as committed. */
enum store_rc store_tenant_live(struct store *s, const char *ns, const char *topic, const char *const *tenants,
                                size_t n, int64_t *live, char *err, size_t errsz) __attribute__((warn_unused_result));

/** In the batch's transaction: one new live key of tenants[i] on partition
 *  parts[i], for each i, in one statement (rows locked in a fixed order). */
enum store_rc store_tenant_add(struct store *s, const char *ns, const char *topic, const char *const *tenants,
                               const int32_t *parts, size_t n, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** In the batch's transaction: the rows a pessimistic claim inserted for
 *  keys that go to the dead-letter topic instead (over their quota). */
enum store_rc store_unclaim(struct store *s, const char *ns, const char *const *keys, size_t n, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** topic, tenant, live_keys — the namespace's tenants with the most live
 *  keys first, at most limit (dedupctl stats). */
enum store_rc store_tenant_summary(struct store *s, const char *ns, int limit, PGresult **out, char *err, size_t errsz)
        __attribute__((warn_unused_result));

#endif
