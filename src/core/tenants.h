/* tenants: a batch's tenants held to their quota of live keys, their new keys counted in its transaction, their messages counted by label once it committed. */
#ifndef DEDUPD_CORE_TENANTS_H
#define DEDUPD_CORE_TENANTS_H

#include "core/batch.h"
#include "core/mode.h"

/** tenant.retention's class for tenant, or NULL (the topic's). */
const struct retention_class *tenant_retention(const struct config *cfg, const struct topic_conf *t,
                                               const char *tenant);

/** tenant.quotas' entry for tenant, else tenant.quota (0: none). */
long tenant_quota(const struct topic_conf *t, const char *tenant);

/**
 * After the claim, before the handler: each tenant with a quota may add
 * quota minus its live keys (as committed); its fresh items past that, in
 * batch order, and their repeats in the batch, go to the dead-letter topic
 * with the reason (a pessimistic claim's rows for them deleted first), and
 * its duplicates of stored keys are absorbed as ever. No statement for a
 * topic without tenants or quotas. PL_DLQ_FAILED when the dead-letter
 * topic did not take them (rolled back).
 */
enum pl_rc tenants_enforce(struct pl_topic *pt, struct batch *b, int pessimistic, char *err, size_t errsz);

/** After the outcomes, in the transaction: the tenants' new live keys
 *  (one statement; none without tenants). */
enum store_rc tenants_add_live(struct pl_topic *pt, const struct batch *b, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** After COMMIT: dedupd_tenant_messages_total and
 *  dedupd_tenant_quota_refused_total. */
void tenants_count(const struct pl_topic *pt, const struct batch *b);

#endif
