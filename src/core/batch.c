/* batch: one batch of one topic as the protocol sees it — each message an item with a named state, and the pure steps on them. */
#include "core/batch.h"

#include "base/mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void batch_init(struct batch *b, const struct topic_conf *t, struct pl_entry *const *ents, size_t n)
{
        size_t m = n ? n : 1;
        memset(b, 0, sizeof(*b));
        b->t = t;
        b->n = n;
        b->items = xcalloc(m, sizeof(*b->items));
        b->keys = xcalloc(m, sizeof(*b->keys));
        b->fresh = xcalloc(m, sizeof(*b->fresh));
        b->prog = xcalloc(m, sizeof(*b->prog));
        for (size_t i = 0; i < n; i++)
                b->items[i] = (struct batch_item){.e = ents[i], .state = ITEM_NEW, .first = i};
}

void batch_free(struct batch *b)
{
        for (size_t i = 0; i < b->n; i++) {
                host_ctx_reset(&b->items[i].ctx);
                free(b->items[i].stored.response);
                free(b->items[i].stored.fingerprint);
        }
        free(b->items);
        free(b->keys);
        free(b->fresh);
        free(b->prog);
        memset(b, 0, sizeof(*b));
}

size_t batch_mark_dead_letters(struct batch *b)
{
        size_t todo = 0;
        for (size_t i = 0; i < b->n; i++) {
                struct batch_item *it = &b->items[i];
                it->state = it->e->st.dlq_reason ? ITEM_DEAD_LETTER : ITEM_NEW;
                todo += it->state == ITEM_DEAD_LETTER && !it->e->st.dead_lettered;
        }
        return todo;
}

/* Keys bytewise, ties by position in the batch. */
struct keyed {
        const char *key;
        size_t idx;
};

static int by_key(const void *a, const void *b)
{
        const struct keyed *x = a, *y = b;
        int c = strcmp(x->key, y->key);
        if (c)
                return c;
        return x->idx < y->idx ? -1 : x->idx > y->idx;
}

void batch_dedupe(struct batch *b)
{
        struct keyed *order = xcalloc(b->n ? b->n : 1, sizeof(*order));
        size_t k = 0;
        for (size_t i = 0; i < b->n; i++)
                if (b->items[i].state == ITEM_NEW)
                        order[k++] = (struct keyed){b->items[i].e->st.idem_key, i};
        qsort(order, k, sizeof(*order), by_key);
        b->nkeys = 0;
        for (size_t j = 0; j < k; j++) {
                struct batch_item *it = &b->items[order[j].idx];
                if (b->nkeys && !strcmp(order[j].key, b->items[b->keys[b->nkeys - 1]].e->st.idem_key)) {
                        it->state = ITEM_REPEAT;
                        it->first = b->keys[b->nkeys - 1];
                        continue;
                }
                it->first = order[j].idx;
                b->keys[b->nkeys++] = order[j].idx;
        }
        free(order);
}

static int by_key_only(const void *a, const void *b)
{
        return strcmp(((const struct keyed *)a)->key, ((const struct keyed *)b)->key);
}

/* The item, if any, whose key is item i's previous key (its own excluded). */
static size_t previous_in_batch(const struct batch *b, const struct keyed *order, size_t k, size_t i)
{
        const struct pl_state *st = &b->items[i].e->st;
        if (b->items[i].state != ITEM_NEW || !st->prev_key || !strcmp(st->prev_key, st->idem_key))
                return SIZE_MAX;
        struct keyed probe = {st->prev_key, 0};
        const struct keyed *hit = bsearch(&probe, order, k, sizeof(*order), by_key_only);
        return hit ? hit->idx : SIZE_MAX;
}

size_t batch_adopt_previous(struct batch *b)
{
        struct keyed *order = xcalloc(b->n ? b->n : 1, sizeof(*order));
        size_t *to = xcalloc(b->n ? b->n : 1, sizeof(*to)), k = 0, adopted = 0;
        for (size_t i = 0; i < b->n; i++)
                if (b->items[i].state == ITEM_NEW)
                        order[k++] = (struct keyed){b->items[i].e->st.idem_key, i};
        qsort(order, k, sizeof(*order), by_key);
        for (size_t i = 0; i < b->n; i++)
                to[i] = previous_in_batch(b, order, k, i);
        /* Every key found first, then changed: order points at the old ones.
         * A chain (three copies over two bucket starts) ends at its oldest. */
        for (size_t i = 0; i < b->n; i++) {
                size_t j = to[i], steps = 0;
                if (j == SIZE_MAX)
                        continue;
                while (to[j] != SIZE_MAX && to[j] != i && steps++ < b->n)
                        j = to[j];
                struct pl_state *st = &b->items[i].e->st, *of = &b->items[j].e->st;
                char *key = xstrdup(of->idem_key), *text = of->key_text ? xstrdup(of->key_text) : NULL;
                free(st->idem_key);
                free(st->key_text);
                st->idem_key = key;
                st->key_text = text;
                adopted++;
        }
        free(to);
        free(order);
        return adopted;
}

static int by_index(const void *a, const void *b)
{
        size_t x = *(const size_t *)a, y = *(const size_t *)b;
        return x < y ? -1 : x > y;
}

void batch_known_as(struct batch *b, size_t i, enum key_status status, const char *response, const char *fingerprint)
{
        struct batch_item *it = &b->items[i];
        it->state = ITEM_KNOWN;
        it->known = 1;
        it->stored = (struct first_outcome){status, response ? xstrdup(response) : NULL,
                                            fingerprint ? xstrdup(fingerprint) : NULL};
}

void batch_drop_known(struct batch *b)
{
        size_t kept = 0;
        for (size_t k = 0; k < b->nkeys; k++)
                if (b->items[b->keys[k]].state != ITEM_KNOWN)
                        b->keys[kept++] = b->keys[k];
        b->nkeys = kept;
}

void batch_claimed(struct batch *b, const int *claimed)
{
        b->nfresh = 0;
        for (size_t k = 0; k < b->nkeys; k++) {
                struct batch_item *it = &b->items[b->keys[k]];
                it->state = claimed[k] ? ITEM_FRESH : ITEM_KNOWN;
                it->known = !claimed[k];
                if (claimed[k])
                        b->fresh[b->nfresh++] = b->keys[k];
        }
        qsort(b->fresh, b->nfresh, sizeof(*b->fresh), by_index);
}

const struct batch_item *batch_first(const struct batch *b, const struct batch_item *it)
{
        return &b->items[it->first];
}

const char *batch_first_fingerprint(const struct batch *b, const struct batch_item *it)
{
        const struct batch_item *f = batch_first(b, it);
        return f->known ? f->stored.fingerprint : f->e->st.fingerprint;
}

enum key_status batch_status(const struct batch_item *it) { return it->state == ITEM_APPLIED ? KEY_DONE : KEY_FAILED; }

const char *batch_response(const struct batch_item *it)
{
        if (it->ctx.response)
                return it->ctx.response;
        return it->state == ITEM_REJECTED ? "rejected" : NULL;
}

void batch_first_outcome(const struct batch *b, const struct batch_item *it, enum key_status *status,
                         const char **response)
{
        const struct batch_item *f = batch_first(b, it);
        if (f->known) {
                *status = f->stored.status;
                *response = f->stored.response;
        } else {
                *status = batch_status(f);
                *response = batch_response(f);
        }
}

enum handler_verdict batch_verdict(dedupd_result_t r, int aborted, int savepoints)
{
        if (r == DEDUPD_REJECT && (!aborted || savepoints))
                return VERDICT_REJECTED;
        if (r == DEDUPD_OK && !aborted)
                return VERDICT_APPLIED;
        return VERDICT_RETRY;
}

/* Find or add the progress entry of a partition (p has room for one more). */
static struct store_progress *progress_of(struct store_progress *p, size_t *np, const char *topic, int32_t partition)
{
        for (size_t i = 0; i < *np; i++)
                if (p[i].partition == partition)
                        return &p[i];
        p[*np] = (struct store_progress){
                .topic = topic, .partition = partition, .next_offset = -1, .from_offset = INT64_MAX, .own_next = -1};
        return &p[(*np)++];
}

void progress_count(struct store_progress *p, size_t *np, const struct pl_msg *m, enum item_state state, int mismatch)
{
        struct store_progress *q = progress_of(p, np, m->topic, m->partition);
        if (m->offset + 1 > q->next_offset)
                q->next_offset = m->offset + 1;
        if (m->offset < q->from_offset)
                q->from_offset = m->offset;
        q->consumed++;
        q->mismatches += mismatch;
        switch (state) {
        case ITEM_DEAD_LETTER: q->dead_lettered++; break;
        case ITEM_APPLIED: q->applied++; break;
        case ITEM_REJECTED: q->rejected++; break;
        case ITEM_REPEAT:
        case ITEM_KNOWN:
        case ITEM_SKIPPED: q->duplicates++; break;
        case ITEM_NEW:
        case ITEM_FRESH:
        case ITEM_LOST: break; /* consumed only: its outcome belongs to another owner */
        }
}

void batch_count(struct batch *b)
{
        b->nprog = 0;
        for (size_t i = 0; i < b->n; i++)
                progress_count(b->prog, &b->nprog, b->items[i].e->msg, b->items[i].state, b->items[i].mismatch);
}
