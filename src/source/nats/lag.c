/* verify_nats: dedupctl verify's lag for source: nats — each subject's last sequence, dedupd's position and the consumer's backlog. */
#include "source/nats/lag.h"

#include <inttypes.h>
#include <stdio.h>

#include "pg/offsets.h"
#include "source/nats/consumers.h"
#include "source/nats/settings.h"

/* The subject's last stream sequence (0: none). */
static int last_seq(struct nats_link *l, const struct config *cfg, const char *subject, uint64_t *out, char *err,
                    size_t errsz)
{
        natsMsg *m = NULL;
        jsErrCode jerr = 0;
        char why[512];
        natsStatus s = js_GetLastMsg(&m, l->js, nats_conf(cfg)->stream, subject, NULL, &jerr);
        *out = 0;
        if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr)
                return 0;
        if (s != NATS_OK) {
                snprintf(err, errsz, "last message of %s: %s", subject, nats_link_error(s, jerr, why, sizeof(why)));
                return -1;
        }
        *out = natsMsg_GetSequence(m);
        natsMsg_Destroy(m);
        return 0;
}

static int one(struct nats_link *l, struct store *s, const struct config *cfg, FILE *out, size_t t, int expect,
               void (*finding)(void *, const char *), void *opaque, char *err, size_t errsz)
{
        const char *topic = cfg->topics[t].name;
        struct nats_consumer_state st;
        int32_t part = 0;
        int64_t db = -1;
        uint64_t last;
        char dbs[24] = "-", line[512];
        if (last_seq(l, cfg, topic, &last, err, errsz) ||
            nats_consumer_state(l, cfg, t, &st, err, errsz) != NATS_CHECK_OK ||
            store_offsets_get(s, cfg->namespace, topic, 1, &part, &db, err, errsz))
                return -1;
        if (db >= 0)
                snprintf(dbs, sizeof(dbs), "%" PRId64, db);
        int behind = last && (db < 0 || (uint64_t)db <= last);
        fprintf(out, "  %-28s %12" PRIu64 " %12s %12" PRIu64 " %10" PRIu64 " %10" PRId64 "\n", topic, last, dbs,
                st.ack_floor, st.pending, st.ack_pending);
        if (expect && (behind || st.pending || st.ack_pending)) {
                snprintf(line, sizeof(line),
                         "lag: %s is not caught up: last sequence %" PRIu64 ", dedupd at %s, "
                         "consumer: %" PRIu64 " not delivered, %" PRId64 " unacknowledged",
                         topic, last, dbs, st.pending, st.ack_pending);
                finding(opaque, line);
        }
        return 0;
}

int nats_lag(struct store *s, const struct config *cfg, FILE *out, int expect_caught_up,
             void (*finding)(void *opaque, const char *line), void *opaque, char *err, size_t errsz)
{
        struct nats_link l;
        int rc = 0;
        if (nats_link_open(&l, cfg, err, errsz))
                return -1;
        fprintf(out, "\nlag (stream %s: the subject's last sequence, dedupd's next one, the consumer's backlog)\n",
                nats_conf(cfg)->stream);
        fprintf(out, "  %-28s %12s %12s %12s %10s %10s\n", "subject", "last", "dedupd", "acked", "pending", "unacked");
        for (size_t t = 0; t < cfg->topic_cnt && !rc; t++)
                rc = one(&l, s, cfg, out, t, expect_caught_up, finding, opaque, err, errsz);
        nats_link_close(&l);
        return rc;
}
