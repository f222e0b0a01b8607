/* pipeline: key → claim → handler → record → progress, one PostgreSQL transaction per batch. */
#include "pipeline.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "external.h"
#include "fault.h"
#include "host.h"
#include "keyspec.h"
#include "log.h"
#include "outbox.h"
#include "pipeline_impl.h"
#include "watchdog.h"

void pipeline_set_watchdog(struct pipeline *pl, struct watchdog *w) { pl->watchdog = w; }

size_t pipeline_take_outbox(struct pipeline *pl)
{
        size_t n = pl->outbox_pending;
        pl->outbox_pending = 0;
        return n;
}

void pl_msg_clear(struct pl_msg *m)
{
        free(m->idem_key);
        free(m->dlq_reason);
        m->idem_key = NULL;
        m->dlq_reason = NULL;
        m->derived = 0;
}

struct pipeline *pipeline_new(const struct config *cfg, struct store *store, struct pl_dlq_ops ops,
                              char *err, size_t errsz)
{
        struct pipeline *pl = calloc(1, sizeof(*pl));
        if (!pl) {
                snprintf(err, errsz, "out of memory");
                return NULL;
        }
        pl->cfg = cfg;
        pl->store = store;
        pl->ops = ops;
        pl->handlers = calloc(cfg->topic_cnt, sizeof(*pl->handlers));
        if (!pl->handlers) {
                snprintf(err, errsz, "out of memory");
                goto error;
        }
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                const struct topic_conf *t = &cfg->topics[i];
                if (loader_open(&pl->handlers[i], t->handler_path, err, errsz) ||
                    loader_init(&pl->handlers[i], t->handler_config, store->conn, err, errsz))
                        goto error;
                log_info("pipeline", "topic %s: handler %s loaded from %s", t->name,
                         pl->handlers[i].desc->name ? pl->handlers[i].desc->name : "?", t->handler_path);
        }
        return pl;
error:
        pipeline_free(pl);
        return NULL;
}

void pipeline_free(struct pipeline *pl)
{
        if (!pl)
                return;
        if (pl->handlers)
                for (size_t i = 0; i < pl->cfg->topic_cnt; i++)
                        loader_close(&pl->handlers[i]);
        free(pl->handlers);
        free(pl->parts);
        free(pl);
}

struct part_state *pipeline_part_state(struct pipeline *pl, size_t topic_idx, int32_t partition)
{
        for (size_t i = 0; i < pl->part_cnt; i++)
                if (pl->parts[i].topic_idx == topic_idx && pl->parts[i].partition == partition)
                        return &pl->parts[i];
        struct part_state *np = realloc(pl->parts, (pl->part_cnt + 1) * sizeof(*np));
        if (!np)
                return NULL;
        pl->parts = np;
        pl->parts[pl->part_cnt] = (struct part_state){.topic_idx = topic_idx,
                                                      .partition = partition,
                                                      .verified_next = -1,
                                                      .counted_at = -1,
                                                      .isolate_until = -1};
        return &pl->parts[pl->part_cnt++];
}

/* A counted start that ends without a crash is taken back: a revocation or a
 * clean stop must not bring a range closer to being dead-lettered. */
static void release_counted(struct pipeline *pl, struct part_state *ps)
{
        char err[256];
        if (ps->counted_at < 0)
                return;
        if (store_ok(pl->store) &&
            store_attempt_release(pl->store, pl->cfg->namespace, pl->cfg->topics[ps->topic_idx].name,
                                  ps->partition, ps->counted_at, ps->counted_single, err, sizeof(err)))
                log_warn("pipeline", "crash-loop ledger: could not take back the start at %s/%d offset %lld: %s",
                         pl->cfg->topics[ps->topic_idx].name, (int)ps->partition,
                         (long long)ps->counted_at, err);
        ps->counted_at = -1;
}

void pipeline_forget(struct pipeline *pl, size_t topic_idx, int32_t partition)
{
        struct part_state *ps = pipeline_part_state(pl, topic_idx, partition);
        if (ps) {
                release_counted(pl, ps);
                ps->verified_next = -1;
        }
}

void pipeline_stop(struct pipeline *pl)
{
        for (size_t i = 0; i < pl->part_cnt; i++)
                release_counted(pl, &pl->parts[i]);
}

/* ---- the crash-loop guard ------------------------------------------------------
 *
 * A batch start is counted before its handlers run and forgotten when it
 * commits, so a row left in dedupd.attempts is a start that crashed (or was
 * ended by the watchdog). A range that crashed once is worked through one
 * message at a time, each run alone — first in its batch, nothing after it —
 * so a crash is then the message's own. A message is dead-lettered once the
 * crashes that included it (those of the batches it was in, then its own)
 * reach retry.max_crashes and at least one of them was its own.
 */

enum guard_verdict { GUARD_CONTINUE, GUARD_BATCH, GUARD_ALONE, GUARD_DB };

static int first_of_partition(struct pl_msg *const *msgs, size_t i)
{
        for (size_t k = 0; k < i; k++)
                if (msgs[k]->partition == msgs[i]->partition)
                        return 0;
        return 1;
}

/* How the first message of a partition in this batch must run. */
static enum guard_verdict guard_verdict(struct pipeline *pl, const struct topic_conf *t,
                                        struct part_state *ps, const struct pl_msg *m, int *inherited)
{
        char err[512];
        int found = 0;
        int64_t until = -1;
        *inherited = 0;
        if (ps->counted_at == m->offset) /* a retry in this process: counted already */
                return ps->counted_single ? GUARD_ALONE : GUARD_BATCH;
        if (ps->verified_next == m->offset && m->offset >= ps->isolate_until)
                return GUARD_CONTINUE; /* from this process's own commit */
        if (store_attempt_covering(pl->store, pl->cfg->namespace, t->name, m->partition, m->offset, &found,
                                   inherited, &until, err, sizeof(err)))
                return GUARD_DB;
        if (!found)
                return GUARD_BATCH;
        if (ps->isolate_until < until) {
                ps->isolate_until = until;
                ps->had_attempts = 1;
                log_warn("pipeline", "topic %s partition %d: offsets up to %lld were in a batch that crashed "
                                     "or stalled dedupd %d time%s: running them one message at a time",
                         t->name, (int)m->partition, (long long)until - 1, *inherited,
                         *inherited == 1 ? "" : "s");
        }
        return GUARD_ALONE;
}

/* Count a start of message m run alone; dead-letter it when its crashes are
 * spent. Returns -1 when the database cannot be reached. */
static int guard_alone(struct pipeline *pl, const struct topic_conf *t, struct part_state *ps,
                       struct pl_msg *m, int inherited)
{
        char err[512];
        int attempts = 0, inh = 0;
        if (ps->counted_at == m->offset)
                return 0;
        if (store_attempt_single(pl->store, pl->cfg->namespace, t->name, m->partition, m->offset, inherited,
                                 &attempts, &inh, err, sizeof(err)))
                return -1;
        ps->counted_at = m->offset;
        ps->counted_single = 1;
        ps->had_attempts = 1;
        int own = attempts - 1, crashes = inh + own;
        if (own >= 1 && crashes >= t->retry_max_crashes && !m->dlq_reason &&
            asprintf(&m->dlq_reason,
                     "crashed or stalled dedupd %d time%s (%d in a batch, %d alone; crash loop; "
                     "retry.max_crashes)",
                     crashes, crashes == 1 ? "" : "s", inh, own) < 0)
                m->dlq_reason = NULL;
        return 0;
}

/* Count a start of partition ps's messages in msgs[0, n) as one batch. */
static int guard_batch(struct pipeline *pl, const struct topic_conf *t, struct part_state *ps,
                       struct pl_msg *const *msgs, size_t n, const struct pl_msg *m)
{
        char err[512];
        int attempts = 0;
        int64_t until = m->offset + 1;
        if (ps->counted_at == m->offset)
                return 0;
        for (size_t k = 0; k < n; k++)
                if (msgs[k]->partition == m->partition && msgs[k]->offset + 1 > until)
                        until = msgs[k]->offset + 1;
        if (store_attempt_batch(pl->store, pl->cfg->namespace, t->name, m->partition, m->offset, until,
                                &attempts, err, sizeof(err)))
                return -1;
        ps->counted_at = m->offset;
        ps->counted_single = 0;
        ps->had_attempts = 1;
        return 0;
}

size_t pipeline_guard(struct pipeline *pl, size_t topic_idx, struct pl_msg *const *msgs, size_t n)
{
        const struct topic_conf *t = &pl->cfg->topics[topic_idx];
        enum guard_verdict v[n ? n : 1];
        int inherited[n ? n : 1];
        size_t limit = n;

        /* First where the batch ends: before the first message that must run
         * alone, or right after it when it comes first. */
        for (size_t i = 0; i < limit; i++) {
                struct part_state *ps = pipeline_part_state(pl, topic_idx, msgs[i]->partition);
                v[i] = GUARD_CONTINUE;
                if (!ps || !first_of_partition(msgs, i))
                        continue;
                v[i] = guard_verdict(pl, t, ps, msgs[i], &inherited[i]);
                if (v[i] == GUARD_DB)
                        return n; /* the database is unreachable: the batch will fail anyway */
                if (v[i] == GUARD_ALONE)
                        limit = i ? i : 1;
        }
        /* Then count the starts of what runs. */
        for (size_t i = 0; i < limit; i++) {
                struct part_state *ps = pipeline_part_state(pl, topic_idx, msgs[i]->partition);
                int rc = 0;
                if (v[i] == GUARD_ALONE)
                        rc = guard_alone(pl, t, ps, msgs[i], inherited[i]);
                else if (v[i] == GUARD_BATCH)
                        rc = guard_batch(pl, t, ps, msgs, limit, msgs[i]);
                if (rc)
                        return limit;
        }
        return limit;
}

const struct pl_stats *pipeline_stats(const struct pipeline *pl) { return &pl->stats; }

static void set_reason(struct pl_msg *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_reason(struct pl_msg *m, const char *fmt, ...)
{
        va_list ap;
        free(m->dlq_reason);
        va_start(ap, fmt);
        if (vasprintf(&m->dlq_reason, fmt, ap) < 0)
                m->dlq_reason = NULL;
        va_end(ap);
}

/* The key and fingerprint, or the reason there is none. A reason set before
 * (the crash-loop guard's) is kept: the dead letter then still names the key. */
static void derive(const struct topic_conf *t, struct pl_msg *m)
{
        char key[KEYSPEC_MAX_KEY_LEN + 1];
        char why[512];

        if (m->value_len > (size_t)t->max_payload_bytes) {
                if (!m->dlq_reason)
                        set_reason(m, "payload too large: %zu bytes, limit %d (max_payload_bytes)",
                                   m->value_len, t->max_payload_bytes);
                return;
        }
        struct keyspec_input in = {m->value, m->value_len, m->key, m->key_len, m->headers, m->header_cnt};
        if (keyspec_derive(t->keyspec, &in, key, sizeof(key), why, sizeof(why))) {
                if (!m->dlq_reason)
                        set_reason(m, "key: %s", why);
                return;
        }
        m->idem_key = strdup(key);
        if (t->fingerprint_fields) {
                keyspec_fingerprint(t->fingerprint_fields, m->value, m->value_len, m->fingerprint);
        } else {
                unsigned char md[SHA256_DIGEST_LENGTH];
                SHA256(m->value ? m->value : (const void *)"", m->value_len, md);
                for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
                        snprintf(m->fingerprint + 2 * i, 3, "%02x", md[i]);
        }
}

/* Derive key and fingerprint once per message; decide dead-lettering. */
void pipeline_prepare(const struct topic_conf *t, struct pl_msg *m)
{
        if (!m->derived) {
                m->derived = 1;
                derive(t, m);
        }
        if (!m->dlq_reason && m->attempts >= t->retry_max_attempts)
                set_reason(m, "handler returned RETRY %d times (retry.max_attempts)", m->attempts);
}

/* Sort helpers: keys bytewise, ties by position in the batch. */
struct keyed {
        const char *key;
        size_t idx;
};

static int keyed_cmp(const void *a, const void *b)
{
        const struct keyed *x = a, *y = b;
        int c = strcmp(x->key, y->key);
        if (c)
                return c;
        return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int idx_cmp(const void *a, const void *b)
{
        size_t x = *(const size_t *)a, y = *(const size_t *)b;
        return x < y ? -1 : x > y;
}

/* A conflicting key's stored first outcome. */
struct outcome {
        char *status, *response, *fingerprint;
};

struct outcome_sink {
        const char **rep_keys; /* sorted bytewise */
        size_t nreps;
        struct outcome *out;   /* per rep */
};

static void keep_outcome(void *opaque, const char *key, const char *status, const char *response,
                         const char *fingerprint)
{
        struct outcome_sink *o = opaque;
        size_t lo = 0, hi = o->nreps;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(o->rep_keys[mid], key);
                if (c == 0) {
                        o->out[mid].status = strdup(status);
                        o->out[mid].response = response ? strdup(response) : NULL;
                        o->out[mid].fingerprint = fingerprint ? strdup(fingerprint) : NULL;
                        log_debug("pipeline", "duplicate %s absorbed; first outcome %s: %s", key, status,
                                  response ? response : "(no response)");
                        return;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
}

static const struct dedupd_header *find_header(const struct pl_msg *m, const char *name)
{
        const struct dedupd_header *h = NULL;
        for (size_t k = 0; k < m->header_cnt; k++)
                if (!strcmp(m->headers[k].name, name))
                        h = &m->headers[k];
        return h;
}

/* The outcome, byte for byte as stored, to the topic the message named. */
static enum store_rc reply(PGconn *conn, const char *ns, const struct topic_conf *t,
                           const struct pl_msg *m, const struct dedupd_header *to, const char *status,
                           const char *response, int duplicate, char *err, size_t errsz)
{
        char topic[256];
        struct dedupd_header hdrs[4];
        size_t nh = 0;
        const struct dedupd_header *corr = find_header(m, t->correlation_header);
        snprintf(topic, sizeof(topic), "%.*s", (int)to->value_len, (const char *)to->value);
        if (corr)
                hdrs[nh++] = *corr;
        hdrs[nh++] = (struct dedupd_header){"dedupd.status", status, strlen(status)};
        hdrs[nh++] = (struct dedupd_header){"dedupd.duplicate", duplicate ? "true" : "false",
                                            duplicate ? 4 : 5};
        if (outbox_insert(conn, ns, m->idem_key, topic, corr ? corr->value : NULL,
                          corr ? corr->value_len : 0, response, response ? strlen(response) : 0, hdrs, nh,
                          err, errsz))
                return PQstatus(conn) != CONNECTION_OK ? STORE_CONN : STORE_ERROR;
        return STORE_OK;
}

static enum pl_rc fail(struct store *s, enum store_rc rc)
{
        store_rollback(s);
        return rc == STORE_CONN ? PL_DB_DOWN : PL_RETRY;
}

size_t pipeline_committed(struct pipeline *pl, size_t topic_idx, const struct store_progress *prog,
                          size_t nprog, struct pl_commit *commits)
{
        const struct topic_conf *t = &pl->cfg->topics[topic_idx];
        for (size_t i = 0; i < nprog; i++) {
                commits[i] = (struct pl_commit){prog[i].topic, prog[i].partition, prog[i].next_offset};
                pl->stats.applied += (uint64_t)prog[i].applied;
                pl->stats.rejected += (uint64_t)prog[i].rejected;
                pl->stats.duplicates += (uint64_t)prog[i].duplicates;
                pl->stats.dead_lettered += (uint64_t)prog[i].dead_lettered;
                pl->stats.mismatches += (uint64_t)prog[i].mismatches;
                struct part_state *ps = pipeline_part_state(pl, topic_idx, prog[i].partition);
                if (!ps)
                        continue;
                ps->verified_next = prog[i].next_offset;
                if (ps->counted_at >= 0 && ps->counted_at < prog[i].next_offset)
                        ps->counted_at = -1;
                if (ps->had_attempts) {
                        char aerr[256];
                        store_attempts_done(pl->store, pl->cfg->namespace, t->name, prog[i].partition,
                                            prog[i].next_offset, aerr, sizeof(aerr));
                        ps->had_attempts = ps->isolate_until > prog[i].next_offset;
                }
        }
        return nprog;
}

struct store_progress *pipeline_progress_of(struct store_progress *p, size_t *np, const char *topic,
                                          int32_t partition)
{
        for (size_t i = 0; i < *np; i++)
                if (p[i].partition == partition)
                        return &p[i];
        p[*np] = (struct store_progress){.topic = topic, .partition = partition, .next_offset = -1,
                                         .from_offset = INT64_MAX};
        return &p[(*np)++];
}

enum pl_rc pipeline_process(struct pipeline *pl, size_t topic_idx, struct pl_msg *const *msgs,
                            size_t n, struct pl_commit *commits, size_t *ncommits, char *err,
                            size_t errsz)
{
        const struct topic_conf *t = &pl->cfg->topics[topic_idx];
        if (t->mode == MODE_EXTERNAL)
                return external_process(pl, topic_idx, msgs, n, commits, ncommits, err, errsz);
        struct handler *h = &pl->handlers[topic_idx];
        struct store *s = pl->store;
        enum pl_rc ret = PL_RETRY;
        enum store_rc rc;
        char ctxname[200];

        struct keyed *ks = calloc(n ? n : 1, sizeof(*ks));
        size_t *reps = calloc(n ? n : 1, sizeof(*reps));       /* batch index of each unique key */
        size_t *order = calloc(n ? n : 1, sizeof(*order));     /* fresh reps in batch order */
        int *fresh = calloc(n ? n : 1, sizeof(*fresh));
        int *status = calloc(n ? n : 1, sizeof(*status));      /* per batch index: 0 none, 1 applied, 2 rejected, 3 dup */
        struct dedupd_ctx *ctxs = calloc(n ? n : 1, sizeof(*ctxs));
        struct pl_msg **dlq = calloc(n ? n : 1, sizeof(*dlq));
        struct store_progress *prog = calloc(n ? n : 1, sizeof(*prog));
        const char **kk = calloc(n ? n : 1, sizeof(*kk)), **kt = calloc(n ? n : 1, sizeof(*kt)),
                   **kf = calloc(n ? n : 1, sizeof(*kf));
        const char **rs = calloc(n ? n : 1, sizeof(*rs)), **rr = calloc(n ? n : 1, sizeof(*rr));
        int32_t *kp = calloc(n ? n : 1, sizeof(*kp));
        int64_t *ko = calloc(n ? n : 1, sizeof(*ko));
        size_t *rep_of = calloc(n ? n : 1, sizeof(*rep_of));  /* batch index -> its key's rep */
        struct outcome *stored = calloc(n ? n : 1, sizeof(*stored)); /* per rep, when it conflicted */
        int64_t *mism = calloc(n ? n : 1, sizeof(*mism));       /* per batch index: 1 mismatch */
        size_t nk = 0, nreps = 0, nfresh = 0, ndlq = 0, nprog = 0;

        *ncommits = 0;
        snprintf(ctxname, sizeof(ctxname), "topic:%s", t->name);
        if (!ks || !reps || !order || !fresh || !status || !ctxs || !dlq || !prog || !kk || !kt ||
            !kf || !rs || !rr || !kp || !ko || !rep_of || !stored || !mism) {
                snprintf(err, errsz, "out of memory");
                goto out;
        }

        /* 1. keys, and what must be dead-lettered */
        for (size_t i = 0; i < n; i++) {
                pipeline_prepare(t, msgs[i]);
                if (msgs[i]->dlq_reason) {
                        if (!msgs[i]->dead_lettered)
                                dlq[ndlq++] = msgs[i];
                } else {
                        ks[nk++] = (struct keyed){msgs[i]->idem_key, i};
                }
        }

        /* 2. dead letters first: their offsets are committed only after the
         *    broker acknowledged them. */
        if (ndlq) {
                if (pl->ops.dead_letter(pl->ops.opaque, t->dlq_topic, pl->cfg->namespace, dlq, ndlq, err,
                                        errsz)) {
                        ret = PL_DLQ_FAILED;
                        goto out;
                }
                fault_point("after_dlq");
                for (size_t i = 0; i < ndlq; i++) {
                        dlq[i]->dead_lettered = 1;
                        log_warn(ctxname, "partition %d offset %lld dead-lettered to %s: %s",
                                 (int)dlq[i]->partition, (long long)dlq[i]->offset, t->dlq_topic,
                                 dlq[i]->dlq_reason);
                }
        }

        /* 3. unique keys in bytewise order; repeats inside the batch count once */
        qsort(ks, nk, sizeof(*ks), keyed_cmp);
        for (size_t i = 0; i < nk; i++) {
                if (i > 0 && !strcmp(ks[i].key, ks[i - 1].key)) {
                        status[ks[i].idx] = 3;
                        rep_of[ks[i].idx] = nreps - 1;
                        continue;
                }
                rep_of[ks[i].idx] = nreps;
                const struct pl_msg *m = msgs[ks[i].idx];
                reps[nreps] = ks[i].idx;
                kk[nreps] = m->idem_key;
                kt[nreps] = m->topic;
                kp[nreps] = m->partition;
                ko[nreps] = m->offset;
                kf[nreps] = m->fingerprint;
                nreps++;
        }

        /* 4. one transaction, watched */
        char what[200];
        snprintf(what, sizeof(what), "batch of %zu from %s", n, t->name);
        watchdog_arm(pl->watchdog, s->conn, t->batch_timeout_ms, what);
        if ((rc = store_begin(s, err, errsz)) ||
            (rc = store_claim(s, pl->cfg->namespace, nreps, kk, kt, kp, ko, kf,
                              t->retention ? t->retention->keep_ms : 0,
                              t->retention ? t->retention->response_ttl_ms : 0, fresh, err, errsz))) {
                ret = fail(s, rc);
                goto out;
        }
        fault_point("after_claim");
        size_t nconf = 0;
        for (size_t i = 0; i < nreps; i++) {
                if (fresh[i]) {
                        order[nfresh++] = reps[i];
                } else {
                        status[reps[i]] = 3;
                        kk[nconf++] = kk[i];
                }
        }
        qsort(order, nfresh, sizeof(*order), idx_cmp);

        /* Keys seen before: their first outcome and fingerprint. */
        if (nconf) {
                struct outcome_sink sink = {kk, nreps, stored};
                /* kk[0..nconf) now holds the conflicting keys; the sink searches
                 * all reps by key, so rebuild the rep key list first. */
                const char **conflicting = calloc(nconf, sizeof(*conflicting));
                if (!conflicting) {
                        snprintf(err, errsz, "out of memory");
                        ret = fail(s, STORE_ERROR);
                        goto out;
                }
                memcpy(conflicting, kk, nconf * sizeof(*kk));
                for (size_t i = 0; i < nreps; i++)
                        kk[i] = msgs[reps[i]]->idem_key;
                rc = store_outcomes(s, pl->cfg->namespace, nconf, conflicting, keep_outcome, &sink, err,
                                    errsz);
                free(conflicting);
                if (rc) {
                        ret = fail(s, rc);
                        goto out;
                }
        }

        /* Same key, different fingerprint: a key-design bug or a client bug. */
        size_t nmis_dlq = 0;
        for (size_t i = 0; i < n; i++) {
                if (status[i] != 3)
                        continue;
                size_t r = rep_of[i];
                const char *first = fresh[r] ? msgs[reps[r]]->fingerprint : stored[r].fingerprint;
                if (!first || !*first || !strcmp(first, msgs[i]->fingerprint))
                        continue;
                mism[i] = 1;
                log_warn(ctxname, "key %s: fingerprint mismatch at partition %d offset %lld: first %.16s…, "
                                  "this message %.16s… (%s)",
                         msgs[i]->idem_key, (int)msgs[i]->partition, (long long)msgs[i]->offset, first,
                         msgs[i]->fingerprint,
                         t->on_mismatch == MISMATCH_DEAD_LETTER ? "dead-lettered" : "absorbed");
                if (t->on_mismatch == MISMATCH_DEAD_LETTER) {
                        snprintf(msgs[i]->stored_fingerprint, sizeof(msgs[i]->stored_fingerprint), "%s", first);
                        free(msgs[i]->dlq_reason);
                        msgs[i]->dlq_reason = strdup("fingerprint mismatch: same key, different payload");
                        status[i] = 4;
                        dlq[nmis_dlq++] = msgs[i];
                }
        }
        if (nmis_dlq) {
                /* Inside the transaction: if the write is not acknowledged, the
                 * batch rolls back and nothing is acknowledged either. */
                if (pl->ops.dead_letter(pl->ops.opaque, t->dlq_topic, pl->cfg->namespace, dlq, nmis_dlq,
                                        err, errsz)) {
                        store_rollback(s);
                        for (size_t i = 0; i < nmis_dlq; i++) {
                                free(dlq[i]->dlq_reason);
                                dlq[i]->dlq_reason = NULL;
                                dlq[i]->stored_fingerprint[0] = '\0';
                        }
                        ret = PL_DLQ_FAILED;
                        goto out;
                }
        }

        const struct dedupd_handler *d = h->desc;
        int use_sp = !(d->flags & DEDUPD_HANDLER_F_CLEAN_REJECT);
        PGconn *conn = s->conn;
        char mctx[256];

        for (size_t j = 0; j < nfresh; j++) {
                size_t i = order[j];
                ctxs[i] = (struct dedupd_ctx){conn, msgs[i]->idem_key, h->log_prefix, NULL, 0,
                                              pl->cfg->namespace, 0};
        }
        if (d->handle_batch && nfresh) {
                const struct dedupd_msg **dm = calloc(nfresh, sizeof(*dm));
                struct dedupd_msg *dms = calloc(nfresh, sizeof(*dms));
                struct dedupd_ctx **dc = calloc(nfresh, sizeof(*dc));
                dedupd_result_t *res = calloc(nfresh, sizeof(*res));
                int retry = 0;
                if (!dm || !dms || !dc || !res) {
                        snprintf(err, errsz, "out of memory");
                        retry = 1;
                } else {
                        for (size_t j = 0; j < nfresh; j++) {
                                const struct pl_msg *m = msgs[order[j]];
                                dms[j] = (struct dedupd_msg){m->topic, m->partition, m->offset,
                                                             m->timestamp_ms, m->key, m->key_len,
                                                             m->value, m->value_len, m->headers,
                                                             m->header_cnt, m->idem_key};
                                dm[j] = &dms[j];
                                dc[j] = &ctxs[order[j]];
                        }
                        dedupd_result_t br = d->handle_batch(h->state, dc, dm, nfresh, res);
                        fault_point("in_handler");
                        if (PQstatus(conn) != CONNECTION_OK) {
                                /* Not the messages' fault: no attempt is counted. */
                                free(dm);
                                free(dms);
                                free(dc);
                                free(res);
                                snprintf(err, errsz, "database connection lost in the handler");
                                ret = fail(s, STORE_CONN);
                                goto out;
                        }
                        if (br == DEDUPD_RETRY || PQtransactionStatus(conn) == PQTRANS_INERROR) {
                                snprintf(err, errsz, "handle_batch asked to retry the batch%s",
                                         br == DEDUPD_RETRY ? "" : " (it left the transaction aborted)");
                                retry = 1;
                        }
                        for (size_t j = 0; j < nfresh && !retry; j++) {
                                if (res[j] == DEDUPD_OK)
                                        status[order[j]] = 1;
                                else if (res[j] == DEDUPD_REJECT)
                                        status[order[j]] = 2;
                                else {
                                        snprintf(err, errsz, "handle_batch result %d for key %s",
                                                 (int)res[j], msgs[order[j]]->idem_key);
                                        retry = 1;
                                }
                        }
                        if (retry)
                                for (size_t j = 0; j < nfresh; j++)
                                        msgs[order[j]]->attempts++;
                }
                free(dm);
                free(dms);
                free(dc);
                free(res);
                if (retry) {
                        store_rollback(s);
                        ret = PL_RETRY;
                        goto out;
                }
        } else if (nfresh) {
                if (use_sp && (rc = store_exec(s, "SAVEPOINT dedupd_msg", err, errsz))) {
                        ret = fail(s, rc);
                        goto out;
                }
                for (size_t j = 0; j < nfresh; j++) {
                        size_t i = order[j];
                        struct pl_msg *m = msgs[i];
                        struct dedupd_msg dm = {m->topic, m->partition, m->offset, m->timestamp_ms,
                                                m->key, m->key_len, m->value, m->value_len,
                                                m->headers, m->header_cnt, m->idem_key};
                        dedupd_result_t r = d->handle(h->state, &ctxs[i], &dm);
                        fault_point("in_handler");
                        int aborted = PQtransactionStatus(conn) == PQTRANS_INERROR;

                        snprintf(mctx, sizeof(mctx), "topic:%s/%d", m->topic, (int)m->partition);
                        if (PQstatus(conn) != CONNECTION_OK) {
                                snprintf(err, errsz, "database connection lost in the handler");
                                ret = fail(s, STORE_CONN);
                                goto out;
                        }
                        if (r == DEDUPD_REJECT && (!aborted || use_sp)) {
                                if (use_sp && (rc = store_exec(s, "ROLLBACK TO SAVEPOINT dedupd_msg",
                                                               err, errsz))) {
                                        ret = fail(s, rc);
                                        goto out;
                                }
                                status[i] = 2;
                        } else if (r == DEDUPD_OK && !aborted) {
                                status[i] = 1;
                                if (use_sp && j + 1 < nfresh &&
                                    (rc = store_exec(s, "RELEASE SAVEPOINT dedupd_msg; SAVEPOINT dedupd_msg",
                                                     err, errsz))) {
                                        ret = fail(s, rc);
                                        goto out;
                                }
                        } else {
                                m->attempts++;
                                if (r != DEDUPD_OK && r != DEDUPD_REJECT && r != DEDUPD_RETRY)
                                        snprintf(err, errsz, "handler returned unknown result %d for key %s",
                                                 (int)r, m->idem_key);
                                else if (aborted)
                                        snprintf(err, errsz,
                                                 "handler left the transaction aborted (an SQL error) for "
                                                 "key %s; treated as RETRY",
                                                 m->idem_key);
                                else
                                        snprintf(err, errsz, "handler asked to retry key %s", m->idem_key);
                                log_warn(mctx, "offset %lld: %s (attempt %d of %d)", (long long)m->offset,
                                         err, m->attempts, t->retry_max_attempts);
                                store_rollback(s);
                                ret = PL_RETRY;
                                goto out;
                        }
                }
        }

        /* 5. final statuses and first responses, in bulk */
        /* Claimed rows say DONE already (in this mode nobody sees a PENDING
         * row: the claim and the effect are one transaction); only a
         * rejection or a response needs writing. */
        size_t nrec = 0;
        for (size_t j = 0; j < nfresh; j++) {
                size_t i = order[j];
                if (status[i] == 1 && !ctxs[i].response)
                        continue;
                kk[nrec] = msgs[i]->idem_key;
                rs[nrec] = status[i] == 1 ? "DONE" : "FAILED";
                rr[nrec] = ctxs[i].response ? ctxs[i].response : (status[i] == 2 ? "rejected" : NULL);
                nrec++;
        }
        if ((rc = store_record(s, pl->cfg->namespace, nrec, kk, rs, rr, err, errsz))) {
                ret = fail(s, rc);
                goto out;
        }

        /* 5b. replies: the first outcome, to whoever asked and named a reply topic */
        if (t->reply_header && *t->reply_header) {
                for (size_t i = 0; i < n; i++) {
                        if (status[i] < 1 || status[i] > 3)
                                continue;
                        const struct dedupd_header *to = find_header(msgs[i], t->reply_header);
                        if (!to || !to->value || !to->value_len)
                                continue;
                        const char *st, *resp;
                        if (status[i] != 3 || fresh[rep_of[i]]) {
                                size_t f = status[i] == 3 ? reps[rep_of[i]] : i;
                                st = status[f] == 1 ? "DONE" : "FAILED";
                                resp = ctxs[f].response ? ctxs[f].response : (status[f] == 2 ? "rejected" : NULL);
                        } else {
                                st = stored[rep_of[i]].status;
                                resp = stored[rep_of[i]].response;
                        }
                        if ((rc = reply(s->conn, pl->cfg->namespace, t, msgs[i], to, st, resp,
                                        status[i] == 3, err, errsz))) {
                                ret = fail(s, rc);
                                goto out;
                        }
                        pl->outbox_pending++;
                }
        }
        for (size_t j = 0; j < nfresh; j++)
                pl->outbox_pending += (size_t)ctxs[order[j]].emitted;

        /* 6. per-partition progress, in the same transaction */
        for (size_t i = 0; i < n; i++) {
                struct store_progress *p = pipeline_progress_of(prog, &nprog, t->name, msgs[i]->partition);
                if (msgs[i]->offset + 1 > p->next_offset)
                        p->next_offset = msgs[i]->offset + 1;
                if (msgs[i]->offset < p->from_offset)
                        p->from_offset = msgs[i]->offset;
                p->consumed++;
                p->mismatches += mism[i];
                if (msgs[i]->dlq_reason)
                        p->dead_lettered++;
                else if (status[i] == 1)
                        p->applied++;
                else if (status[i] == 2)
                        p->rejected++;
                else if (status[i] == 3)
                        p->duplicates++;
        }
        if ((rc = store_progress(s, pl->cfg->namespace, nprog, prog, err, errsz))) {
                ret = fail(s, rc);
                goto out;
        }
        fault_point("before_commit");
        if ((rc = store_commit(s, err, errsz))) {
                /* A lost COMMIT acknowledgement is indistinguishable from a
                 * failed one: redelivery finds every key claimed if it did commit. */
                ret = fail(s, rc);
                goto out;
        }

        fault_point("after_commit");
        /* 7. committed: report, and where each partition may be acknowledged */
        *ncommits = pipeline_committed(pl, topic_idx, prog, nprog, commits);
        pl->stats.batches++;
        pl->stats.consumed += n;
        for (size_t j = 0; j < nfresh; j++) {
                size_t i = order[j];
                if (status[i] == 2)
                        log_info(ctxname, "key %s rejected: %s", msgs[i]->idem_key,
                                 ctxs[i].response ? ctxs[i].response : "rejected");
        }
        log_debug(ctxname, "batch of %zu: %zu applied or rejected, %zu keys seen before", n, nfresh, nconf);
        ret = PL_OK;
out:
        watchdog_disarm(pl->watchdog);
        if (ret != PL_OK)
                pl->stats.retries++;
        for (size_t i = 0; i < n && ctxs; i++)
                host_ctx_reset(&ctxs[i]);
        free(ks);
        free(reps);
        free(order);
        free(fresh);
        free(status);
        free(ctxs);
        free(dlq);
        free(prog);
        free(kk);
        free(kt);
        free(kf);
        free(rs);
        free(rr);
        free(kp);
        free(ko);
        free(rep_of);
        for (size_t i = 0; stored && i < n; i++) {
                free(stored[i].status);
                free(stored[i].response);
                free(stored[i].fingerprint);
        }
        free(stored);
        free(mism);
        return ret;
}
