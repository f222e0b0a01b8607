/* relay: publishes what committed batches wrote to the outbox, and marks each row sent only once the broker has it. */
#include "core/relay.h"

#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

#include "pg/outbox.h"

/* The row as a record: its own headers, then dedupd.outbox.id and dedupd.key. */
static void to_record(const struct outbox_row *w, struct dedupd_header *h, struct record *rec)
{
        size_t k = 0;
        for (; k < w->msg.rec.header_cnt; k++)
                h[k] = w->msg.rec.headers[k];
        h[k++] = (struct dedupd_header){"dedupd.outbox.id", w->id_text, strlen(w->id_text)};
        if (w->msg.idem_key)
                h[k++] = (struct dedupd_header){"dedupd.key", w->msg.idem_key, strlen(w->msg.idem_key)};
        *rec = w->msg.rec;
        rec->headers = h;
        rec->header_cnt = k;
}

int relay_run(struct store *s, const struct sink *sink, const char *ns, int batch, char *err, size_t errsz)
{
        struct outbox_row *rows = NULL;
        struct record *recs = NULL;
        struct dedupd_header **hdrs = NULL;
        size_t n = 0;
        int ret = -1;

        if (!store_ok(s) || store_begin(s, err, errsz))
                return -1;
        if (store_outbox_take(s, ns, batch, &rows, &n, err, errsz))
                goto out;
        recs = xcalloc(n ? n : 1, sizeof(*recs));
        hdrs = xcalloc(n ? n : 1, sizeof(*hdrs));
        for (size_t i = 0; i < n; i++) {
                hdrs[i] = xcalloc(rows[i].msg.rec.header_cnt + 2, sizeof(**hdrs));
                to_record(&rows[i], hdrs[i], &recs[i]);
        }
        if (n && (sink->publish(sink->opaque, recs, n, err, errsz) || store_outbox_sent(s, rows, n, err, errsz)))
                goto out;
        if (store_commit(s, err, errsz))
                goto out;
        ret = (int)n;
out:
        if (ret < 0)
                store_rollback(s);
        for (size_t i = 0; hdrs && i < n; i++)
                free(hdrs[i]);
        free(hdrs);
        free(recs);
        store_outbox_rows_free(rows, n);
        return ret;
}
