/* relay: publishes what committed batches wrote to the outbox, and marks each row sent only once the broker has it. */
#include "core/relay.h"

#include <stdlib.h>
#include <string.h>

#include "pg/outbox.h"

/* The row as a record: its own headers, then dedupd.outbox.id and dedupd.key. */
static void to_record(const struct outbox_row *w, struct dedupd_header *h, struct pl_record *rec)
{
        size_t k = 0;
        for (; k < w->msg.header_cnt; k++)
                h[k] = w->msg.headers[k];
        h[k++] = (struct dedupd_header){"dedupd.outbox.id", w->id_text, strlen(w->id_text)};
        if (w->msg.idem_key)
                h[k++] = (struct dedupd_header){"dedupd.key", w->msg.idem_key, strlen(w->msg.idem_key)};
        *rec = (struct pl_record){w->msg.topic, w->msg.key, w->msg.key_len, w->msg.value,
                                        w->msg.value_len, h, k};
}

int relay_run(struct store *s, const struct sink *sink, const char *ns, int batch, char *err, size_t errsz)
{
        struct outbox_row *rows = NULL;
        struct pl_record *recs = NULL;
        struct dedupd_header **hdrs = NULL;
        size_t n = 0;
        int ret = -1;

        if (!store_ok(s) || store_begin(s, err, errsz))
                return -1;
        if (store_outbox_take(s, ns, batch, &rows, &n, err, errsz))
                goto out;
        recs = calloc(n ? n : 1, sizeof(*recs));
        hdrs = calloc(n ? n : 1, sizeof(*hdrs));
        if (!recs || !hdrs)
                abort();
        for (size_t i = 0; i < n; i++) {
                hdrs[i] = calloc(rows[i].msg.header_cnt + 2, sizeof(**hdrs));
                if (!hdrs[i])
                        abort();
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
