/* split: the guard against a message that makes a batch fail without being named — the batch is halved until that one message runs alone, where its failures count toward retry.max_attempts. */
#include "core/split.h"

#include "base/log.h"
#include "core/steps.h"
#include "ops/metrics.h"

size_t split_take(const struct split *s, size_t n) { return s->limit && s->limit < n ? s->limit : n; }

void split_reset(struct split *s) { *s = (struct split){0}; }

/* Committed: the failed batch is n messages further through. */
static void passed(struct split *s, const struct pl_topic *pt, size_t n)
{
        if (!s->limit)
                return;
        s->left = s->left > n ? s->left - n : 0;
        if (s->left)
                return;
        log_info(pt->ctx, "the batch that failed has committed, message by message where it had to: whole "
                          "batches again");
        split_reset(s);
}

/* The batch of n failed: the next one takes its first half. */
static void narrow(struct split *s, const struct pl_topic *pt, const struct pl_msg *first, size_t n, const char *err)
{
        if (!s->limit) {
                s->left = n;
                log_warn(pt->ctx,
                         "batch of %zu from partition %d offset %lld failed, and no message of it was "
                         "named (%s): splitting it to find the one that causes it",
                         n, (int)first->partition, (long long)first->offset, err);
                metrics_split(pt->t->name);
        }
        s->limit = (n + 1) / 2;
}

/* The message ran alone and failed: that was its own attempt. */
static void blame(struct split *s, const struct pl_topic *pt, struct pl_entry *e, const char *err)
{
        const struct pl_msg *m = e->msg;
        char mctx[256];
        if (!s->limit) {
                s->limit = 1;
                s->left = 1;
        }
        step_attempt(&e->st, "%s", err);
        snprintf(mctx, sizeof(mctx), "topic:%s/%d", m->topic, (int)m->partition);
        log_warn(mctx, "offset %lld: %s (attempt %d of %d)", (long long)m->offset, err, e->st.attempts,
                 pt->t->retry_max_attempts);
}

enum pl_rc split_after(struct split *s, const struct pl_topic *pt, struct pl_entry *const *ents, size_t n,
                       enum pl_rc rc, const char *err)
{
        if (rc == PL_OK)
                passed(s, pt, n);
        if (rc != PL_SPLIT || !n)
                return rc;
        if (n == 1) {
                blame(s, pt, ents[0], err);
                return PL_RETRY;
        }
        narrow(s, pt, ents[0]->msg, n, err);
        return PL_SPLIT;
}
