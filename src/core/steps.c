/* steps: the steps both modes take the same way — derive a key, dead-letter, judge a fingerprint mismatch, book a commit. */
#include "core/steps.h"

#include "base/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/sha.h>

#include "base/fault.h"
#include "base/hex.h"
#include "base/json_depth.h"
#include "base/keyspec.h"
#include "base/tenant_name.h"
#include "base/utf8.h"
#include "ops/metrics.h"
#include "base/log.h"
#include "core/buckets.h"
#include "core/guard.h"
#include "pg/mismatches.h"

static void set_reason(struct pl_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The first reason found stays (a crash loop, found before the key is derived). */
#define FIRST_REASON(st, ...)                                                                                          \
        do {                                                                                                           \
                if (!(st)->dlq_reason)                                                                                 \
                        set_reason((st), __VA_ARGS__);                                                                 \
        } while (0)
static void set_reason(struct pl_state *st, const char *fmt, ...)
{
        va_list ap;
        free(st->dlq_reason);
        va_start(ap, fmt);
        st->dlq_reason = xvasprintf(fmt, ap);
        va_end(ap);
}

static void fingerprint(const struct topic_conf *t, struct pl_entry *e)
{
        const struct pl_msg *m = e->msg;
        unsigned char md[SHA256_DIGEST_LENGTH];
        if (t->fingerprint_fields) {
                keyspec_fingerprint(t->fingerprint_fields, m->value, m->value_len, e->st.fingerprint);
                return;
        }
        SHA256(m->value ? m->value : (const void *)"", m->value_len, md);
        hex_encode(md, SHA256_DIGEST_LENGTH, e->st.fingerprint);
}

/* The limits a message must keep before anything reads it (docs/configuring.md,
 * Limits), or the reason it is dead-lettered. */
static int over_limits(const struct pl_topic *pt, struct pl_entry *e)
{
        const struct pl_msg *m = e->msg;
        const struct topic_conf *t = pt->t;
        const struct config *cfg = pt->cfg;
        size_t depth;

        if (m->value_len > (size_t)t->max_payload_bytes) {
                FIRST_REASON(&e->st, "payload too large: %zu bytes exceeds %s (%d)", m->value_len,
                             t->payload_bytes_own ? "topics[].max_payload_bytes" : "limits.payload_bytes",
                             t->max_payload_bytes);
                return 1;
        }
        if (m->header_cnt > (size_t)cfg->limit_headers) {
                FIRST_REASON(&e->st, "%zu headers exceed limits.headers (%d)", m->header_cnt, cfg->limit_headers);
                return 1;
        }
        if ((keyspec_needs_json(t->keyspec) || t->fingerprint_fields) &&
            (depth = json_depth_over(m->value, m->value_len, (size_t)cfg->limit_json_depth))) {
                FIRST_REASON(&e->st, "payload is JSON nested more than %zu levels deep: exceeds limits.json_depth (%d)",
                             depth - 1, cfg->limit_json_depth);
                return 1;
        }
        return 0;
}

/* key.previous, until its window ends: the key the previous template
 * builds for this message (none when it cannot build one from it: then no
 * key of that version was built from it either). */
static void previous_key(const struct pl_topic *pt, struct pl_entry *e, const struct record *in)
{
        const struct topic_conf *t = pt->t;
        char key[KEYSPEC_MAX_KEY_LEN + 1], why[512];
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (!t->prev_keyspec || (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 >= t->key_prev_until_ms)
                return;
        if (!keyspec_derive_text(t->prev_keyspec, in, (size_t)pt->cfg->limit_key_bytes, key, sizeof(key), NULL, why,
                                 sizeof(why)))
                e->st.prev_key = xstrdup(key);
}

/* *s prefixed "tenant:", in place. */
static void prefix(char **s, const char *tenant)
{
        char *p;
        if (!*s)
                return;
        p = xasprintf("%s:%s", tenant, *s);
        free(*s);
        *s = p;
}

/* tenant.key: whose message it is, a tenant name, put before its keys (so
 * tenants never share one). 1 with the reason set when it has none. */
static int tenant_of(const struct pl_topic *pt, struct pl_entry *e, const struct record *in)
{
        const struct keytmpl *kt = pt->t->tenant_keytmpl;
        char why[512];
        json_t *root = NULL;
        char *v = NULL;
        if (!kt)
                return 0;
        if (!keytmpl_needs_json(kt) || (root = keyspec_load_json(in, why, sizeof(why))))
                v = keytmpl_render(kt, in, root, why, sizeof(why));
        json_decref(root);
        if (!v || !tenant_name_ok(v, strlen(v))) {
                if (v && utf8_text_ok(v, strlen(v)) && strlen(v) <= 200)
                        FIRST_REASON(&e->st, "tenant: '%s' is not a tenant name (1 to 64 of A-Z a-z 0-9 . _ -)", v);
                else
                        FIRST_REASON(&e->st, "tenant: %s",
                                     v ? "not a tenant name (1 to 64 of A-Z a-z 0-9 . _ -)" : why);
                free(v);
                return 1;
        }
        e->st.tenant = v;
        prefix(&e->st.idem_key, v);
        prefix(&e->st.key_text, v);
        prefix(&e->st.prev_key, v);
        return 0;
}

/* The key and fingerprint, or the reason there is none. */
static void derive(const struct pl_topic *pt, struct pl_entry *e)
{
        const struct pl_msg *m = e->msg;
        const struct topic_conf *t = pt->t;
        char key[KEYSPEC_MAX_KEY_LEN + 1];
        char why[512];

        if (over_limits(pt, e))
                return;
        struct record in = {.key = m->key,
                            .key_len = m->key_len,
                            .value = m->value,
                            .value_len = m->value_len,
                            .headers = m->headers,
                            .header_cnt = m->header_cnt,
                            .props = m->props,
                            .prop_cnt = m->prop_cnt};
        if (keyspec_derive_text(t->keyspec, &in, (size_t)pt->cfg->limit_key_bytes, key, sizeof(key), &e->st.key_text,
                                why, sizeof(why))) {
                FIRST_REASON(&e->st, "key: %s", why);
                return;
        }
        e->st.idem_key = xstrdup(key);
        previous_key(pt, e, &in);
        if (tenant_of(pt, e, &in))
                return;
        char *late = NULL;
        if (buckets_key(pt->cfg, t, m, &in, &e->st, &late)) {
                FIRST_REASON(&e->st, "%s", late);
                free(late);
                return;
        }
        fingerprint(t, e);
}

void step_prepare(const struct pl_topic *pt, struct pl_entry *e)
{
        const struct topic_conf *t = pt->t;
        struct pl_state *st = &e->st;
        if (!st->derived) {
                st->derived = 1;
                derive(pt, e);
        }
        if (!st->dlq_reason && st->attempts >= t->retry_max_attempts)
                set_reason(st, "%s %d times (retry.max_attempts)",
                           st->fail_reason ? st->fail_reason : "handler returned RETRY", st->attempts);
}

void step_attempt(struct pl_state *st, const char *fmt, ...)
{
        va_list ap;
        st->attempts++;
        free(st->fail_reason);
        va_start(ap, fmt);
        st->fail_reason = xvasprintf(fmt, ap);
        va_end(ap);
}

/* What the sink is told of e: the message, and dedupd's words on it. */
static struct pl_dead_letter letter_of(const struct pl_entry *e)
{
        const struct pl_state *st = &e->st;
        return (struct pl_dead_letter){.msg = e->msg,
                                       .reason = st->dlq_reason ? st->dlq_reason : "unknown",
                                       .idem_key = st->idem_key,
                                       .fingerprint = st->fingerprint[0] ? st->fingerprint : NULL,
                                       .stored_fingerprint = st->stored_fingerprint[0] ? st->stored_fingerprint : NULL};
}

int step_dead_letter(struct pl_topic *pt, struct pl_entry *const *ents, size_t n, char *err, size_t errsz)
{
        if (!n)
                return 0;
        struct pl_dead_letter *letters = xcalloc(n, sizeof(*letters)); /* n: up to 100,000 */
        for (size_t i = 0; i < n; i++)
                letters[i] = letter_of(ents[i]);
        int rc = pt->sink->dead_letter(pt->sink->opaque, pt->t->dlq_topic, pt->cfg->namespace, letters, n, err, errsz);
        free(letters);
        if (rc)
                return -1;
        fault_point("after_dlq");
        for (size_t i = 0; i < n; i++) {
                ents[i]->st.dead_lettered = 1;
                log_warn(pt->ctx, "partition %d offset %lld dead-lettered to %s: %s", (int)ents[i]->msg->partition,
                         (long long)ents[i]->msg->offset, pt->t->dlq_topic, ents[i]->st.dlq_reason);
        }
        return 0;
}

enum mismatch_verdict step_mismatch(struct pl_topic *pt, struct pl_entry *e, const char *first)
{
        struct pl_state *st = &e->st;
        int letter = pt->t->on_mismatch == MISMATCH_DEAD_LETTER;
        if (!first || !*first || !strcmp(first, st->fingerprint))
                return MISMATCH_NONE;
        log_warn(pt->ctx,
                 "key %s: fingerprint mismatch at partition %d offset %lld: first %.16s…, "
                 "this message %.16s… (%s)",
                 st->idem_key, (int)e->msg->partition, (long long)e->msg->offset, first, st->fingerprint,
                 letter ? "dead-lettered" : "absorbed");
        if (!letter)
                return MISMATCH_KEEP;
        snprintf(st->stored_fingerprint, sizeof(st->stored_fingerprint), "%s", first);
        set_reason(st, "fingerprint mismatch: same key, different payload");
        return MISMATCH_LETTER;
}

enum store_rc step_note_mismatch(struct pl_topic *pt, const struct pl_entry *e, const char *first,
                                 enum mismatch_verdict v, char *err, size_t errsz)
{
        const struct store_mismatch m = {e->st.idem_key, e->msg->topic,     e->msg->partition,   e->msg->offset,
                                         first,          e->st.fingerprint, v == MISMATCH_LETTER};
        return store_mismatch_note(pt->store, pt->cfg->namespace, &m, err, errsz);
}

static void count_outcomes(const char *topic, const struct store_progress *p)
{
        metrics_messages(topic, "applied", (uint64_t)p->applied);
        metrics_messages(topic, "rejected", (uint64_t)p->rejected);
        metrics_messages(topic, "duplicate", (uint64_t)p->duplicates);
        metrics_messages(topic, "dead_lettered", (uint64_t)p->dead_lettered);
        metrics_mismatches(topic, (uint64_t)p->mismatches);
}

void step_counted(struct pl_topic *pt, const struct store_progress *prog, size_t nprog)
{
        for (size_t i = 0; i < nprog; i++) {
                pt->stats->applied += (uint64_t)prog[i].applied;
                pt->stats->rejected += (uint64_t)prog[i].rejected;
                pt->stats->duplicates += (uint64_t)prog[i].duplicates;
                pt->stats->dead_lettered += (uint64_t)prog[i].dead_lettered;
                pt->stats->mismatches += (uint64_t)prog[i].mismatches;
                count_outcomes(pt->t->name, &prog[i]);
        }
}

size_t step_committed(struct pl_topic *pt, const struct store_progress *prog, size_t nprog, struct pl_commit *commits)
{
        step_counted(pt, prog, nprog);
        for (size_t i = 0; i < nprog; i++) {
                commits[i] = (struct pl_commit){prog[i].topic, prog[i].partition, prog[i].next_offset};
                struct part_state *ps = part_state(pt->parts, pt->topic_idx, prog[i].partition);
                if (prog[i].next_offset > ps->own_next)
                        ps->own_next = prog[i].next_offset;
                guard_committed(pt, ps, prog[i].next_offset);
        }
        return nprog;
}

enum pl_rc step_progress(struct pl_topic *pt, struct store_progress *prog, size_t nprog, enum store_rc *rc, char *err,
                         size_t errsz)
{
        struct store_behind behind;
        for (size_t i = 0; i < nprog; i++)
                prog[i].own_next = part_state(pt->parts, pt->topic_idx, prog[i].partition)->own_next;
        if ((*rc = store_progress(pt->store, pt->cfg->namespace, nprog, prog, &behind, err, errsz)))
                return PL_RETRY;
        if (!behind.count)
                return PL_OK;
        if (behind.stored < 0)
                snprintf(err, errsz,
                         "partition %d has no position in the database although this process committed "
                         "up to offset %lld there",
                         (int)behind.partition, (long long)behind.own);
        else
                snprintf(err, errsz,
                         "partition %d is at offset %lld in the database, below the %lld this process "
                         "committed",
                         (int)behind.partition, (long long)behind.stored, (long long)behind.own);
        if (behind.count > 1)
                snprintf(err + strlen(err), errsz - strlen(err), " (and %zu more partition(s))", behind.count - 1);
        return PL_REPOSITION;
}

enum pl_rc step_fail(struct store *s, enum store_rc rc)
{
        store_rollback(s);
        if (rc == STORE_CONN)
                return PL_DB_DOWN;
        /* A value of the batch was refused: which message's is found by splitting. */
        return rc == STORE_DATA ? PL_SPLIT : PL_RETRY;
}
