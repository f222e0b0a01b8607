/* tenants: a batch's tenants held to their quota of live keys, their new keys counted in its transaction, their messages counted by label once it committed. */
#include "core/tenants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"
#include "core/steps.h"
#include "ops/metrics.h"
#include "pg/tenants.h"

const struct retention_class *tenant_retention(const struct config *cfg, const struct topic_conf *t, const char *tenant)
{
        json_t *v = t->tenant_retention && tenant ? json_object_get(t->tenant_retention, tenant) : NULL;
        return v && json_is_string(v) ? config_class(cfg, json_string_value(v)) : NULL;
}

long tenant_quota(const struct topic_conf *t, const char *tenant)
{
        json_t *v = t->tenant_quotas && tenant ? json_object_get(t->tenant_quotas, tenant) : NULL;
        if (v && json_is_string(v))
                return strtol(json_string_value(v), NULL, 10);
        return t->tenant_quota;
}

/* Whether any tenant of this topic has a quota at all. */
static int has_quotas(const struct topic_conf *t)
{
        const char *name;
        json_t *v;
        if (t->tenant_quota)
                return 1;
        json_object_foreach(t->tenant_quotas, name, v)
        {
                if (json_is_string(v) && strtol(json_string_value(v), NULL, 10) > 0)
                        return 1;
        }
        return 0;
}

/* The distinct tenants of the fresh items that have a quota, into names. */
static size_t quota_tenants(const struct topic_conf *t, const struct batch *b, const char **names)
{
        size_t n = 0;
        for (size_t j = 0; j < b->nfresh; j++) {
                const char *tn = b->items[b->fresh[j]].e->st.tenant;
                size_t k = 0;
                while (k < n && strcmp(names[k], tn))
                        k++;
                if (k == n && tenant_quota(t, tn) > 0)
                        names[n++] = tn;
        }
        return n;
}

/* The fresh items past their tenant's room: marked, and dropped from b->fresh. */
static size_t refuse_over(const struct topic_conf *t, struct batch *b, const char **names, int64_t *room, size_t nt)
{
        size_t kept = 0, refused = 0;
        for (size_t j = 0; j < b->nfresh; j++) {
                struct batch_item *it = &b->items[b->fresh[j]];
                size_t k = 0;
                while (k < nt && strcmp(names[k], it->e->st.tenant))
                        k++;
                if (k < nt && room[k]-- <= 0) {
                        it->state = ITEM_DEAD_LETTER;
                        it->e->st.over_quota = 1;
                        free(it->e->st.dlq_reason);
                        it->e->st.dlq_reason = xasprintf("tenant %s holds its quota of %ld live keys (tenant.quota)",
                                                         it->e->st.tenant, tenant_quota(t, it->e->st.tenant));
                        refused++;
                } else {
                        b->fresh[kept++] = b->fresh[j];
                }
        }
        b->nfresh = kept;
        return refused;
}

/* The refused items and their repeats in the batch: written to the
 * dead-letter topic (the rows a pessimistic claim made for them first
 * deleted). */
static enum pl_rc letter_refused(struct pl_topic *pt, struct batch *b, int pessimistic, char *err, size_t errsz)
{
        struct pl_entry **letters = xcalloc(b->n, sizeof(*letters));
        const char **keys = xcalloc(b->n, sizeof(*keys));
        size_t n = 0, nk = 0;
        enum pl_rc rc = PL_OK;
        for (size_t i = 0; i < b->n; i++) {
                struct batch_item *it = &b->items[i];
                const struct batch_item *first = batch_first(b, it);
                if (it != first && first->e->st.over_quota && it->state == ITEM_REPEAT) {
                        it->state = ITEM_DEAD_LETTER;
                        it->e->st.over_quota = 1;
                        free(it->e->st.dlq_reason);
                        it->e->st.dlq_reason = xstrdup(first->e->st.dlq_reason);
                }
                if (it->state == ITEM_DEAD_LETTER && it->e->st.over_quota && !it->e->st.dead_lettered) {
                        letters[n++] = it->e;
                        if (it == first)
                                keys[nk++] = it->e->st.idem_key;
                }
        }
        enum store_rc src = pessimistic ? store_unclaim(pt->store, pt->cfg->namespace, keys, nk, err, errsz) : STORE_OK;
        if (src)
                rc = step_fail(pt->store, src);
        else if (n && step_dead_letter(pt, letters, n, err, errsz)) {
                store_rollback(pt->store);
                for (size_t i = 0; i < n; i++) { /* checked again on the next attempt */
                        free(letters[i]->st.dlq_reason);
                        letters[i]->st.dlq_reason = NULL;
                        letters[i]->st.over_quota = 0;
                }
                rc = PL_DLQ_FAILED;
        }
        free(keys);
        free(letters);
        return rc;
}

enum pl_rc tenants_enforce(struct pl_topic *pt, struct batch *b, int pessimistic, char *err, size_t errsz)
{
        const struct topic_conf *t = pt->t;
        if (!t->tenant_keytmpl || !b->nfresh || !has_quotas(t))
                return PL_OK;
        const char **names = xcalloc(b->nfresh, sizeof(*names));
        int64_t *room = xcalloc(b->nfresh, sizeof(*room));
        size_t nt = quota_tenants(t, b, names);
        enum store_rc src =
                nt ? store_tenant_live(pt->store, pt->cfg->namespace, t->name, names, nt, room, err, errsz) : STORE_OK;
        enum pl_rc rc = PL_OK;
        if (src) {
                rc = step_fail(pt->store, src);
        } else {
                for (size_t k = 0; k < nt; k++)
                        room[k] = tenant_quota(t, names[k]) - room[k];
                if (refuse_over(t, b, names, room, nt))
                        rc = letter_refused(pt, b, pessimistic, err, errsz);
        }
        free(names);
        free(room);
        return rc;
}

enum store_rc tenants_add_live(struct pl_topic *pt, const struct batch *b, char *err, size_t errsz)
{
        if (!pt->t->tenant_keytmpl || !b->nfresh)
                return STORE_OK;
        const char **names = xcalloc(b->nfresh, sizeof(*names));
        int32_t *parts = xcalloc(b->nfresh, sizeof(*parts));
        size_t n = 0;
        for (size_t j = 0; j < b->nfresh; j++) {
                const struct batch_item *it = &b->items[b->fresh[j]];
                if (it->state != ITEM_APPLIED && it->state != ITEM_REJECTED)
                        continue;
                names[n] = it->e->st.tenant;
                parts[n++] = it->e->msg->partition;
        }
        enum store_rc rc = store_tenant_add(pt->store, pt->cfg->namespace, pt->t->name, names, parts, n, err, errsz);
        free(names);
        free(parts);
        return rc;
}

static const char *outcome_of(const struct batch_item *it)
{
        switch (it->state) {
        case ITEM_APPLIED: return "applied";
        case ITEM_REJECTED: return "rejected";
        case ITEM_REPEAT:
        case ITEM_KNOWN: return "duplicate";
        case ITEM_DEAD_LETTER: return "dead_lettered";
        default: return NULL;
        }
}

void tenants_count(const struct pl_topic *pt, const struct batch *b)
{
        const struct topic_conf *t = pt->t;
        if (!t->tenant_keytmpl)
                return;
        for (size_t i = 0; i < b->n; i++) {
                const struct batch_item *it = &b->items[i];
                const char *outcome = outcome_of(it);
                if (outcome)
                        metrics_tenant_message(t->name, it->e->st.tenant, outcome, it->e->st.over_quota,
                                               t->tenant_metrics_top);
        }
}
