/* provenance: where absorbed duplicates come from — a deterministic sample of each committed batch's duplicates, buffered and written off the batch's path, then counted. */
#include "core/provenance.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/utf8.h"
#include "core/reply.h"
#include "ops/metrics.h"
#include "pg/duplicates.h"

/* What the lanes sampled and the runner has not written yet. */
static struct {
        pthread_mutex_t lock;
        struct store_dup_row *rows;
        size_t n, cap;
        int64_t last_flush_ms;
        struct log_ratelimit rl;
} buf = {.lock = PTHREAD_MUTEX_INITIALIZER};

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
        memcpy(s, v, cut);
        s[cut] = '\0';
        return s;
}

static void rows_free(struct store_dup_row *rows, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free((char *)rows[i].key);
                free((char *)rows[i].topic);
                free((char *)rows[i].source);
        }
        free(rows);
}

static void push(const struct pl_topic *pt, const struct batch_item *it)
{
        const struct pl_msg *m = it->e->msg;
        if (buf.n == buf.cap) {
                buf.cap = buf.cap ? buf.cap * 2 : 64;
                buf.rows = xrealloc(buf.rows, buf.cap * sizeof(*buf.rows));
        }
        buf.rows[buf.n++] = (struct store_dup_row){xstrdup(it->e->st.idem_key), xstrdup(m->topic), m->partition,
                                                   m->offset, source_of(pt->t, m)};
}

void provenance_collect(const struct pl_topic *pt, const struct batch *b)
{
        if (pt->t->provenance_every <= 0)
                return;
        pthread_mutex_lock(&buf.lock);
        for (size_t i = 0; i < b->n && buf.n < PROVENANCE_BUFFER_MAX; i++) {
                const struct batch_item *it = &b->items[i];
                const struct pl_msg *m = it->e->msg;
                if ((it->state == ITEM_REPEAT || it->state == ITEM_KNOWN) &&
                    provenance_sampled(pt->t->provenance_every, it->e->st.idem_key, m->partition, m->offset))
                        push(pt, it);
        }
        pthread_mutex_unlock(&buf.lock);
}

static void seen(void *opaque, const char *topic, const char *origin, const char *source, int64_t delay_ms)
{
        (void)opaque;
        metrics_duplicate_sampled(topic, origin, source, (double)delay_ms / 1000.0);
}

#define FLUSH_INTERVAL_MS 1000
void provenance_flush(struct store *s, const char *ns, int64_t now_ms, int force)
{
        struct store_dup_row *rows;
        size_t n;
        char err[512];
        pthread_mutex_lock(&buf.lock);
        n = buf.n;
        if (!n || (!force && now_ms - buf.last_flush_ms < FLUSH_INTERVAL_MS && n < PROVENANCE_BUFFER_MAX / 2)) {
                pthread_mutex_unlock(&buf.lock);
                return;
        }
        rows = buf.rows;
        buf.rows = NULL;
        buf.n = buf.cap = 0;
        buf.last_flush_ms = now_ms;
        pthread_mutex_unlock(&buf.lock);
        if (store_note_duplicates(s, ns, rows, n, seen, NULL, err, sizeof(err)))
                log_limited(&buf.rl, 1, 60000, LOG_WARN, "provenance",
                            "%zu sampled duplicate(s) not recorded: %s (the duplicates were absorbed and counted)", n,
                            err);
        rows_free(rows, n);
}

void provenance_discard(void)
{
        pthread_mutex_lock(&buf.lock);
        rows_free(buf.rows, buf.n);
        buf.rows = NULL;
        buf.n = buf.cap = 0;
        pthread_mutex_unlock(&buf.lock);
}
