/* guard: the crash-loop guard — counts batch starts that never committed, isolates the range, dead-letters the message that keeps crashing. */
#include "core/guard.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "base/mem.h"
#include "ops/metrics.h"
#include "pg/attempts.h"

/*
 * A batch start is counted before its handlers run and forgotten when it
 * commits, so a row left in dedupd.attempts is a start that crashed (or was
 * ended by the watchdog). A range that crashed once is worked through one
 * message at a time, each run alone — first in its batch, nothing after it —
 * so a crash is then the message's own. A message is dead-lettered once the
 * crashes that included it (those of the batches it was in, then its own)
 * reach retry.max_crashes and at least one of them was its own.
 */

enum guard_verdict { GUARD_CONTINUE, GUARD_BATCH, GUARD_ALONE, GUARD_DB };

void guard_release(struct pl_topic *pt, struct part_state *ps)
{
        char err[256];
        const char *topic = pt->cfg->topics[ps->topic_idx].name;
        if (ps->counted_at < 0)
                return;
        if (store_ok(pt->store) &&
            store_attempt_release(pt->store, pt->cfg->namespace, topic, ps->partition, ps->counted_at,
                                  ps->counted_single, err, sizeof(err)))
                log_warn("guard", "crash-loop ledger: could not take back the start at %s/%d offset %lld: %s", topic,
                         (int)ps->partition, (long long)ps->counted_at, err);
        ps->counted_at = -1;
}

static int first_of_partition(struct pl_msg *const *msgs, size_t i)
{
        for (size_t k = 0; k < i; k++)
                if (msgs[k]->partition == msgs[i]->partition)
                        return 0;
        return 1;
}

/* How the first message of a partition in this batch must run. */
static enum guard_verdict verdict(struct pl_topic *pt, struct part_state *ps, const struct pl_msg *m,
                                  int *inherited)
{
        char err[512];
        int found = 0;
        int64_t until = -1;
        *inherited = 0;
        if (ps->counted_at == m->offset) /* a retry in this process: counted already */
                return ps->counted_single ? GUARD_ALONE : GUARD_BATCH;
        if (ps->verified_next == m->offset && m->offset >= ps->isolate_until)
                return GUARD_CONTINUE; /* from this process's own commit */
        if (store_attempt_covering(pt->store, pt->cfg->namespace, pt->t->name, m->partition, m->offset, &found,
                                   inherited, &until, err, sizeof(err)))
                return GUARD_DB;
        if (!found)
                return GUARD_BATCH;
        if (ps->isolate_until < until) {
                ps->isolate_until = until;
                ps->had_attempts = 1;
                log_warn(pt->ctx, "partition %d: offsets up to %lld were in a batch that crashed or stalled "
                                  "dedupd %d time%s: running them one message at a time",
                         (int)m->partition, (long long)until - 1, *inherited, *inherited == 1 ? "" : "s");
        }
        return GUARD_ALONE;
}

/* Count a start of message m run alone; dead-letter it when its crashes are
 * spent. Returns -1 when the database cannot be reached. */
static int count_alone(struct pl_topic *pt, struct part_state *ps, struct pl_msg *m, int inherited)
{
        char err[512];
        int attempts = 0, inh = 0;
        if (ps->counted_at == m->offset)
                return 0;
        if (store_attempt_single(pt->store, pt->cfg->namespace, pt->t->name, m->partition, m->offset, inherited,
                                 &attempts, &inh, err, sizeof(err)))
                return -1;
        ps->counted_at = m->offset;
        ps->counted_single = 1;
        ps->had_attempts = 1;
        metrics_quarantine(pt->t->name);
        int own = attempts - 1, crashes = inh + own;
        if (own >= 1 && crashes >= pt->t->retry_max_crashes && !m->dlq_reason)
                m->dlq_reason = xasprintf("crashed or stalled dedupd %d time%s (%d in a batch, %d alone; crash loop; "
                                          "retry.max_crashes)",
                                          crashes, crashes == 1 ? "" : "s", inh, own);
        return 0;
}

/* Count a start of partition ps's messages in msgs[0, n) as one batch. */
static int count_batch(struct pl_topic *pt, struct part_state *ps, struct pl_msg *const *msgs, size_t n,
                       const struct pl_msg *m)
{
        char err[512];
        int attempts = 0;
        int64_t until = m->offset + 1;
        if (ps->counted_at == m->offset)
                return 0;
        for (size_t k = 0; k < n; k++)
                if (msgs[k]->partition == m->partition && msgs[k]->offset + 1 > until)
                        until = msgs[k]->offset + 1;
        if (store_attempt_batch(pt->store, pt->cfg->namespace, pt->t->name, m->partition, m->offset, until,
                                &attempts, err, sizeof(err)))
                return -1;
        ps->counted_at = m->offset;
        ps->counted_single = 0;
        ps->had_attempts = 1;
        return 0;
}

size_t guard_batch_start(struct pl_topic *pt, struct pl_msg *const *msgs, size_t n)
{
        enum guard_verdict v[n ? n : 1];
        int inherited[n ? n : 1];
        size_t limit = n;

        /* First where the batch ends: before the first message that must run
         * alone, or right after it when it comes first. */
        for (size_t i = 0; i < limit; i++) {
                v[i] = GUARD_CONTINUE;
                if (!first_of_partition(msgs, i))
                        continue;
                v[i] = verdict(pt, part_state(pt->parts, pt->topic_idx, msgs[i]->partition), msgs[i], &inherited[i]);
                if (v[i] == GUARD_DB)
                        return n; /* the database is unreachable: the batch will fail anyway */
                if (v[i] == GUARD_ALONE)
                        limit = i ? i : 1;
        }
        /* Then count the starts of what runs. */
        for (size_t i = 0; i < limit; i++) {
                struct part_state *ps = part_state(pt->parts, pt->topic_idx, msgs[i]->partition);
                int rc = 0;
                if (v[i] == GUARD_ALONE)
                        rc = count_alone(pt, ps, msgs[i], inherited[i]);
                else if (v[i] == GUARD_BATCH)
                        rc = count_batch(pt, ps, msgs, limit, msgs[i]);
                if (rc)
                        return limit;
        }
        return limit;
}
