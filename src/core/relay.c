/* relay: publishes what committed batches wrote to the outbox, and settles each row by what the broker said of it. */
#include "core/relay.h"

#include "base/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "ops/metrics.h"
#include "pg/outbox.h"

/* The row as a record: its own headers, then dedupd.outbox.id (its msg_id,
 * also the broker's own dedup id where there is one) and dedupd.key. */
static void to_record(const struct outbox_row *w, struct dedupd_header *h, struct record *rec)
{
        size_t k = 0;
        for (; k < w->msg.rec.header_cnt; k++)
                h[k] = w->msg.rec.headers[k];
        h[k++] = (struct dedupd_header){"dedupd.outbox.id", w->msg_id, strlen(w->msg_id)};
        if (w->msg.idem_key)
                h[k++] = (struct dedupd_header){"dedupd.key", w->msg.idem_key, strlen(w->msg.idem_key)};
        *rec = w->msg.rec;
        rec->headers = h;
        rec->header_cnt = k;
        rec->msg_id = w->msg_id;
}

/* Hand every row to the sink; out[i] says what became of rows[i]. A row the
 * broker could never take (a name that is none there: a row written before
 * the checks at write time, or by hand) fails unsent, with the reason. */
static void publish_rows(const struct sink *sink, const struct outbox_row *rows, size_t n, struct sink_outcome *out)
{
        struct record *recs = xcalloc(n, sizeof(*recs));
        struct dedupd_header **hdrs = xcalloc(n, sizeof(*hdrs));
        struct sink_outcome *got = xcalloc(n, sizeof(*got));
        size_t *at = xcalloc(n, sizeof(*at)), k = 0;
        for (size_t i = 0; i < n; i++) {
                hdrs[i] = xcalloc(rows[i].msg.rec.header_cnt + 2, sizeof(**hdrs));
                out[i] = got[i] = (struct sink_outcome){.fate = SINK_UNSENT, .reason = "the sink gave no answer"};
                to_record(&rows[i], hdrs[i], &recs[k]);
                if (sink->check && sink->check(sink->opaque, &recs[k], out[i].reason, sizeof(out[i].reason)))
                        out[i].fate = SINK_FAILED;
                else
                        at[k++] = i;
        }
        if (k)
                sink->publish(sink->opaque, recs, k, got);
        for (size_t j = 0; j < k; j++)
                out[at[j]] = got[j];
        for (size_t i = 0; i < n; i++)
                free(hdrs[i]);
        free(hdrs);
        free(recs);
        free(got);
        free(at);
}

/* A broker's words may quote a name cut anywhere: stored as printable ASCII
 * (anything else becomes '?'), so the text column always takes it. */
static void clean_reason(char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
                        *s = '?';
}

/* The answers to store (acknowledged and refused rows), and the counts. */
static size_t answers_of(const struct outbox_row *rows, struct sink_outcome *out, size_t n,
                         struct outbox_answer *answers, struct relay_round *rd)
{
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                clean_reason(out[i].reason);
                switch (out[i].fate) {
                case SINK_ACKED:
                        answers[k++] = (struct outbox_answer){rows[i].id, NULL};
                        rd->sent++;
                        break;
                case SINK_FAILED:
                        answers[k++] = (struct outbox_answer){rows[i].id, out[i].reason};
                        rd->failed++;
                        break;
                case SINK_UNSENT:
                        if (!rd->unsent++)
                                snprintf(rd->unsent_reason, sizeof(rd->unsent_reason), "%s", out[i].reason);
                        break;
                }
        }
        return k;
}

static const struct outbox_row *row_of(const struct outbox_row *rows, size_t n, int64_t id, size_t *at)
{
        for (*at = 0; *at < n; (*at)++)
                if (rows[*at].id == id)
                        return &rows[*at];
        return NULL;
}

/* Each failure at WARN (a burst, then rate-limited); each row given up at
 * ERROR, once: only the statement that gave it up reports it. */
static void report(const struct config *cfg, const struct outbox_row *rows, size_t n, const struct sink_outcome *out,
                   const struct outbox_failure *failed, size_t nfailed, struct relay_round *rd)
{
        static struct log_ratelimit rl;
        for (size_t k = 0; k < nfailed; k++) {
                size_t i;
                const struct outbox_row *w = row_of(rows, n, failed[k].id, &i);
                if (!w)
                        continue;
                if (failed[k].given_up) {
                        rd->given_up++;
                        log_error("outbox",
                                  "row %" PRId64 " to %s given up after %d failed publishes: %s; it is kept "
                                  "(dedupctl outbox list, dedupctl outbox retry %" PRId64 ")",
                                  w->id, w->msg.rec.topic, failed[k].failures, out[i].reason, w->id);
                } else {
                        log_limited(&rl, 10, 60000, LOG_WARN, "outbox",
                                    "row %" PRId64 " to %s not published (failure %d of %d): %s; retried later, "
                                    "the rows behind it go on",
                                    w->id, w->msg.rec.topic, failed[k].failures, cfg->outbox_max_failures,
                                    out[i].reason);
                }
        }
        metrics_outbox_published(rd->sent);
        metrics_outbox_failed(rd->failed);
        metrics_outbox_given_up(rd->given_up);
}

/* Publish the rows and settle them: what the broker acknowledged is marked
 * sent in the same statement that counts what it refused. */
static int settle_round(struct store *s, const struct sink *sink, const struct config *cfg,
                        const struct outbox_row *rows, size_t n, struct relay_round *rd, char *err, size_t errsz)
{
        const struct outbox_retry rp = {cfg->outbox_retry_backoff_ms, cfg->outbox_retry_backoff_max_ms,
                                        cfg->outbox_max_failures};
        struct sink_outcome *out = xcalloc(n, sizeof(*out));
        struct outbox_answer *answers = xcalloc(n, sizeof(*answers));
        struct outbox_failure *failed = NULL;
        size_t nfailed = 0;
        int rc = 0;

        publish_rows(sink, rows, n, out);
        size_t k = answers_of(rows, out, n, answers, rd);
        if (k && store_outbox_settle(s, answers, k, &rp, &failed, &nfailed, err, errsz))
                rc = -1;
        else if (store_commit(s, err, errsz))
                rc = -1;
        else
                report(cfg, rows, n, out, failed, nfailed, rd);
        free(failed);
        free(answers);
        free(out);
        return rc;
}

int relay_run(struct store *s, const struct sink *sink, const struct config *cfg, struct relay_round *rd, char *err,
              size_t errsz)
{
        struct outbox_row *rows = NULL;
        size_t n = 0;
        int rc = -1;

        memset(rd, 0, sizeof(*rd));
        if (!store_ok(s) || store_begin(s, err, errsz))
                return -1;
        if (store_outbox_take(s, cfg->namespace, cfg->outbox_batch, &rows, &n, err, errsz))
                goto out;
        rd->taken = n;
        if (!n)
                rc = store_commit(s, err, errsz) ? -1 : 0;
        else
                rc = settle_round(s, sink, cfg, rows, n, rd, err, errsz);
out:
        if (rc)
                store_rollback(s);
        store_outbox_rows_free(rows, n);
        return rc;
}
