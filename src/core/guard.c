/* guard: the crash-loop guard — counts batch starts that never committed, isolates the range, dead-letters the message that keeps crashing. */
#include "core/guard.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "base/mem.h"
#include "core/instance.h"
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
 *
 * Every row is its writer's (instance_owner): a row another instance left
 * while it is still live is that peer's batch in flight — competing
 * consumers of one queue number their deliveries alike, a Kafka zombie
 * finishes a batch after a rebalance — and counts for nothing. Only rows
 * whose owner died (or whose lease ran out) are crashes.
 */

enum guard_verdict { GUARD_CONTINUE, GUARD_BATCH, GUARD_ALONE, GUARD_DB };

/* A ledger statement that fails (the database gone, a role without its
 * GRANTs) leaves the batch uncounted: said, at most once a minute. */
static struct log_ratelimit rl_ledger;

static void ledger_failed(const struct pl_topic *pt, const char *what, const char *err)
{
        log_limited(&rl_ledger, 1, 60000, LOG_WARN, pt->ctx, "crash-loop ledger: %s: %s (this batch starts uncounted)",
                    what, err);
}

/* How one message of the batch runs, decided before anything is counted. */
struct guard_plan {
        enum guard_verdict verdict;
        int inherited; /* crashes of the batches that held it (GUARD_ALONE) */
};

void guard_release(struct pl_topic *pt, struct part_state *ps)
{
        char err[256];
        const char *topic = pt->cfg->topics[ps->topic_idx].name;
        if (ps->counted_at < 0)
                return;
        if (store_ok(pt->store) &&
            store_attempt_release(pt->store, pt->cfg->namespace, topic, ps->partition, ps->counted_at,
                                  ps->counted_single, instance_owner(), err, sizeof(err)))
                log_warn("guard", "crash-loop ledger: could not take back the start at %s/%d offset %lld: %s", topic,
                         (int)ps->partition, (long long)ps->counted_at, err);
        ps->counted_at = -1;
}

static int first_of_partition(struct pl_entry *const *ents, size_t i)
{
        for (size_t k = 0; k < i; k++)
                if (ents[k]->msg->partition == ents[i]->msg->partition)
                        return 0;
        return 1;
}

/* How the first message of a partition in this batch must run. */
static enum guard_verdict verdict(struct pl_topic *pt, struct part_state *ps, const struct pl_msg *m, int *inherited)
{
        char err[512];
        struct store_crashes c;
        *inherited = 0;
        if (ps->counted_at == m->offset) /* a retry in this process: counted already */
                return ps->counted_single ? GUARD_ALONE : GUARD_BATCH;
        if (ps->verified_next == m->offset && m->offset >= ps->isolate_until)
                return GUARD_CONTINUE; /* from this process's own commit */
        if (store_attempt_covering(pt->store, pt->cfg->namespace, pt->t->name, m->partition, m->offset,
                                   instance_owner(), &c, err, sizeof(err))) {
                ledger_failed(pt, "looking up earlier starts", err);
                return GUARD_DB;
        }
        if (c.live)
                log_info(pt->ctx,
                         "partition %d: offset %lld is in a batch that live instance%s %s %s in flight: "
                         "not a crash",
                         (int)m->partition, (long long)m->offset, c.live == 1 ? "" : "s", c.live_owners,
                         c.live == 1 ? "has" : "have");
        if (!c.crashes)
                return GUARD_BATCH;
        *inherited = c.crashes;
        if (ps->isolate_until < c.until) {
                ps->isolate_until = c.until;
                ps->had_attempts = 1;
                log_warn(pt->ctx,
                         "partition %d: offsets up to %lld were in a batch that crashed or stalled "
                         "dedupd %d time%s (%s): running them one message at a time",
                         (int)m->partition, (long long)c.until - 1, c.crashes, c.crashes == 1 ? "" : "s", c.owners);
        }
        return GUARD_ALONE;
}

/* Count a start of message m run alone; dead-letter it when its crashes are
 * spent. Returns -1 when the database cannot be reached. */
static int count_alone(struct pl_topic *pt, struct part_state *ps, struct pl_entry *e, int inherited)
{
        const struct pl_msg *m = e->msg;
        char err[512];
        int attempts = 0, inh = 0;
        if (ps->counted_at == m->offset)
                return 0;
        guard_release(pt, ps);
        if (instance_ensure(pt->store, pt->cfg, err, sizeof(err)) ||
            store_attempt_single(pt->store, pt->cfg->namespace, pt->t->name, m->partition, m->offset, inherited,
                                 instance_owner(), &attempts, &inh, err, sizeof(err))) {
                ledger_failed(pt, "counting a start alone", err);
                return -1;
        }
        ps->counted_at = m->offset;
        ps->counted_until = m->offset + 1;
        ps->counted_single = 1;
        ps->had_attempts = 1;
        metrics_quarantine(pt->t->name);
        int own = attempts - 1, crashes = inh + own;
        if (own >= 1 && crashes >= pt->t->retry_max_crashes && !e->st.dlq_reason)
                e->st.dlq_reason =
                        xasprintf("crashed or stalled dedupd %d time%s (%d in a batch, %d alone; crash loop; "
                                  "retry.max_crashes)",
                                  crashes, crashes == 1 ? "" : "s", inh, own);
        return 0;
}

/* Count a start of partition ps's messages in ents[0, n) as one batch. */
static int count_batch(struct pl_topic *pt, struct part_state *ps, struct pl_entry *const *ents, size_t n,
                       const struct pl_msg *m)
{
        char err[512];
        int64_t until = m->offset + 1;
        if (ps->counted_at == m->offset)
                return 0;
        for (size_t k = 0; k < n; k++)
                if (ents[k]->msg->partition == m->partition && ents[k]->msg->offset + 1 > until)
                        until = ents[k]->msg->offset + 1;
        guard_release(pt, ps);
        if (instance_ensure(pt->store, pt->cfg, err, sizeof(err)) ||
            store_attempt_batch(pt->store, pt->cfg->namespace, pt->t->name, m->partition, m->offset, until,
                                instance_owner(), err, sizeof(err))) {
                ledger_failed(pt, "counting a batch start", err);
                return -1;
        }
        ps->counted_at = m->offset;
        ps->counted_until = until;
        ps->counted_single = 0;
        ps->had_attempts = 1;
        return 0;
}

/* Where the batch ends: before the first message that must run alone, or
 * right after it when it comes first. n when the database is unreachable
 * (the batch will fail anyway; *db set). */
static size_t plan_batch(struct pl_topic *pt, struct pl_entry *const *ents, size_t n, struct guard_plan *plan, int *db)
{
        size_t limit = n;
        *db = 0;
        for (size_t i = 0; i < limit; i++) {
                plan[i] = (struct guard_plan){GUARD_CONTINUE, 0};
                if (!first_of_partition(ents, i))
                        continue;
                const struct pl_msg *m = ents[i]->msg;
                plan[i].verdict =
                        verdict(pt, part_state(pt->parts, pt->topic_idx, m->partition), m, &plan[i].inherited);
                if (plan[i].verdict == GUARD_DB) {
                        *db = 1;
                        return n;
                }
                if (plan[i].verdict == GUARD_ALONE)
                        limit = i ? i : 1;
        }
        return limit;
}

/* Count the starts of what runs. */
static void count_starts(struct pl_topic *pt, struct pl_entry *const *ents, size_t limit, const struct guard_plan *plan)
{
        for (size_t i = 0; i < limit; i++) {
                struct part_state *ps = part_state(pt->parts, pt->topic_idx, ents[i]->msg->partition);
                int rc = 0;
                if (plan[i].verdict == GUARD_ALONE)
                        rc = count_alone(pt, ps, ents[i], plan[i].inherited);
                else if (plan[i].verdict == GUARD_BATCH)
                        rc = count_batch(pt, ps, ents, limit, ents[i]->msg);
                if (rc)
                        return;
        }
}

size_t guard_batch_start(struct pl_topic *pt, struct pl_entry *const *ents, size_t n)
{
        /* On the heap: a batch holds up to batch.max_messages (100,000). */
        struct guard_plan *plan = xcalloc(n ? n : 1, sizeof(*plan));
        int db;
        size_t limit = plan_batch(pt, ents, n, plan, &db);
        if (!db)
                count_starts(pt, ents, limit, plan);
        free(plan);
        return limit;
}

void guard_committed(struct pl_topic *pt, struct part_state *ps, int64_t next_offset)
{
        char err[256];
        ps->verified_next = next_offset;
        /* A counted batch that failed and was split commits in parts: its
         * row stays mine (released at a clean stop, a crash's if I die)
         * until a commit reaches its end, where the DELETE below takes it. */
        if (ps->counted_at >= 0 && ps->counted_until <= next_offset)
                ps->counted_at = -1;
        if (!ps->had_attempts)
                return;
        if (store_attempts_done(pt->store, pt->cfg->namespace, pt->t->name, ps->partition, next_offset,
                                instance_owner(), err, sizeof(err)))
                log_warn(pt->ctx, "crash-loop ledger: %s (its rows are forgotten later)", err);
        ps->had_attempts = ps->isolate_until > next_offset || ps->counted_at >= 0;
}
