/* provenance: where absorbed duplicates come from — a deterministic sample of a batch's duplicates recorded in its transaction, counted once it committed. */
#include "core/provenance.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/utf8.h"
#include "core/reply.h"
#include "ops/metrics.h"
#include "pg/duplicates.h"

struct prov_seen {
        char *topic, *origin, *source;
        int64_t delay_ms;
};

/* FNV-1a, 64 bits, over the key, the partition and the offset. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
        const unsigned char *c = p;
        for (size_t i = 0; i < n; i++)
                h = (h ^ c[i]) * 1099511628211ULL;
        return h;
}

int provenance_sampled(int every, const char *key, int32_t partition, int64_t offset)
{
        if (every <= 0)
                return 0;
        if (every == 1)
                return 1;
        uint64_t h = fnv(14695981039346656037ULL, key, strlen(key));
        h = fnv(h, &partition, sizeof(partition));
        h = fnv(h, &offset, sizeof(offset));
        return h % (uint64_t)every == 0;
}

/* What may be stored of the producer header: at most 200 bytes of
 * well-formed UTF-8 (a longer one cut at a character), else a marker. */
#define SOURCE_MAX 200
static char *source_of(const struct topic_conf *t, const struct pl_msg *m)
{
        const struct dedupd_header *h;
        if (!t->provenance_header || !*t->provenance_header || !(h = reply_header(m, t->provenance_header)) ||
            !h->value)
                return NULL;
        const char *v = h->value;
        size_t n = h->value_len, cut = 0, len = 1;
        while (cut < n && (len = utf8_char_len(v + cut, n - cut)) && cut + len <= SOURCE_MAX)
                cut += len;
        if (!len || !utf8_text_ok(v, cut))
                return xstrdup("(not UTF-8)");
        char *s = xmalloc(cut + 1);
        memcpy(s, h->value, cut);
        s[cut] = '\0';
        return s;
}

static void seen(void *opaque, const char *topic, const char *origin, const char *source, int64_t delay_ms)
{
        struct provenance *p = opaque;
        if (p->n == p->cap) {
                p->cap = p->cap ? p->cap * 2 : 16;
                p->seen = xrealloc(p->seen, p->cap * sizeof(*p->seen));
        }
        p->seen[p->n++] =
                (struct prov_seen){xstrdup(topic), xstrdup(origin), source ? xstrdup(source) : NULL, delay_ms};
}

static void clear(struct provenance *p)
{
        for (size_t i = 0; i < p->n; i++) {
                free(p->seen[i].topic);
                free(p->seen[i].origin);
                free(p->seen[i].source);
        }
        p->n = 0;
}

enum store_rc provenance_note(const struct pl_topic *pt, const struct batch *b, struct provenance *p, char *err,
                              size_t errsz)
{
        const struct topic_conf *t = pt->t;
        struct store_dup_row *rows = NULL;
        size_t n = 0;
        clear(p);
        for (size_t i = 0; i < b->n; i++) {
                const struct batch_item *it = &b->items[i];
                const struct pl_msg *m = it->e->msg;
                if ((it->state != ITEM_REPEAT && it->state != ITEM_KNOWN) ||
                    !provenance_sampled(t->provenance_every, it->e->st.idem_key, m->partition, m->offset))
                        continue;
                if (!rows)
                        rows = xcalloc(b->n, sizeof(*rows));
                rows[n++] =
                        (struct store_dup_row){it->e->st.idem_key, m->topic, m->partition, m->offset, source_of(t, m)};
        }
        enum store_rc rc = store_note_duplicates(pt->store, pt->cfg->namespace, rows, n, seen, p, err, errsz);
        for (size_t i = 0; i < n; i++)
                free((char *)rows[i].source);
        free(rows);
        return rc;
}

void provenance_count(struct provenance *p)
{
        for (size_t i = 0; i < p->n; i++)
                metrics_duplicate_sampled(p->seen[i].topic, p->seen[i].origin, p->seen[i].source,
                                          (double)p->seen[i].delay_ms / 1000.0);
        clear(p);
}

void provenance_free(struct provenance *p)
{
        clear(p);
        free(p->seen);
        p->seen = NULL;
        p->cap = 0;
}
