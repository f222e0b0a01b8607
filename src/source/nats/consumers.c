/* consumers: the stream and each topic's durable pull consumer on the server — checked, created at a start sequence, moved back, described. */
#include "source/nats/consumers.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "core/retention.h"
#include "source/nats/settings.h"

static enum nats_check_rc failed(natsStatus s, jsErrCode jerr, const char *what, char *err, size_t errsz)
{
        char why[512];
        snprintf(err, errsz, "%s: %s", what, nats_link_error(s, jerr, why, sizeof(why)));
        return nats_link_unreachable(s) ? NATS_CHECK_UNREACHABLE : NATS_CHECK_FAILED;
}

static enum nats_check_rc stream_info(struct nats_link *l, const struct config *cfg, jsStreamInfo **si, char *err,
                                      size_t errsz)
{
        jsErrCode jerr = 0;
        char what[320];
        natsStatus s = js_GetStreamInfo(si, l->js, nats_conf(cfg)->stream, NULL, &jerr);
        if (s == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr) {
                snprintf(err, errsz,
                         "nats.stream %s does not exist on %s: create it (its subjects must include "
                         "every topics[].name)",
                         nats_conf(cfg)->stream, l->server);
                return NATS_CHECK_FAILED;
        }
        if (s != NATS_OK) {
                snprintf(what, sizeof(what), "stream %s on %s", nats_conf(cfg)->stream, l->server);
                return failed(s, jerr, what, err, errsz);
        }
        return NATS_CHECK_OK;
}

int64_t nats_stream_retention_ms(const jsStreamInfo *si)
{
        int64_t ns = si->Config ? si->Config->MaxAge : 0;
        if (ns <= 0)
                return -1;
        return (ns + 999999) / 1000000; /* a part of a millisecond still keeps the message */
}

/* The stream's retention in its own words: "max_age 1h", or unlimited. */
static const char *max_age_words(int64_t ms, char *buf, size_t bufsz)
{
        char d[64];
        if (ms < 0) {
                snprintf(buf, bufsz, "max_age 0, unlimited");
                return buf;
        }
        config_format_duration(ms, d, sizeof(d));
        snprintf(buf, bufsz, "max_age %s", d);
        return buf;
}

/* Every topic's retention class keeps its keys as long as the stream keeps
 * messages: the first that does not in err. */
static enum nats_check_rc retention_floor(const struct config *cfg, const jsStreamInfo *si, char *err, size_t errsz)
{
        int64_t ms = nats_stream_retention_ms(si);
        char said[96];
        struct retention_holder h = {"stream", nats_conf(cfg)->stream, max_age_words(ms, said, sizeof(said))};
        for (size_t t = 0; t < cfg->topic_cnt; t++) {
                const struct retention_class *c = cfg->topics[t].retention;
                if (c && retention_compare(&h, c, ms, NULL, err, errsz))
                        return NATS_CHECK_FAILED;
                if (c)
                        log_debug("nats", "stream %s: %s, class '%s' of subject %s keeps keys long enough",
                                  nats_conf(cfg)->stream, said, c->name, cfg->topics[t].name);
        }
        return NATS_CHECK_OK;
}

static enum nats_check_rc stream_read(struct nats_link *l, const struct config *cfg, int floor, uint64_t *last_seq,
                                      char *err, size_t errsz)
{
        jsStreamInfo *si = NULL;
        enum nats_check_rc rc = stream_info(l, cfg, &si, err, errsz);
        if (rc != NATS_CHECK_OK)
                return rc;
        if (floor)
                rc = retention_floor(cfg, si, err, errsz);
        if (last_seq)
                *last_seq = si->State.LastSeq;
        jsStreamInfo_Destroy(si);
        return rc;
}

enum nats_check_rc nats_stream_check(struct nats_link *l, const struct config *cfg, uint64_t *last_seq, char *err,
                                     size_t errsz)
{
        return stream_read(l, cfg, 1, last_seq, err, errsz);
}

enum nats_check_rc nats_stream_lookup(struct nats_link *l, const struct config *cfg, uint64_t *last_seq, char *err,
                                      size_t errsz)
{
        return stream_read(l, cfg, 0, last_seq, err, errsz);
}

/* Create topic t's consumer: explicit acks (each message acknowledged after
 * its COMMIT), from start or from the first message. */
static enum nats_check_rc create(struct nats_link *l, const struct config *cfg, size_t t, int64_t start,
                                 uint64_t *first, char *err, size_t errsz)
{
        jsConsumerConfig cc;
        jsConsumerInfo *ci = NULL;
        jsErrCode jerr = 0;
        char name[256];
        nats_consumer_name(cfg, t, name, sizeof(name));
        jsConsumerConfig_Init(&cc);
        cc.Durable = name;
        cc.FilterSubject = cfg->topics[t].name;
        cc.AckPolicy = js_AckExplicit;
        cc.AckWait = (int64_t)nats_conf(cfg)->ack_wait_ms * 1000000;
        cc.MaxAckPending = nats_conf(cfg)->max_ack_pending;
        cc.DeliverPolicy = js_DeliverAll;
        if (start >= 1) {
                cc.DeliverPolicy = js_DeliverByStartSequence;
                cc.OptStartSeq = (uint64_t)start;
        }
        natsStatus s = js_AddConsumer(&ci, l->js, nats_conf(cfg)->stream, &cc, NULL, &jerr);
        if (s != NATS_OK) {
                char what[400];
                snprintf(what, sizeof(what), "creating consumer %s on stream %s", name, nats_conf(cfg)->stream);
                return failed(s, jerr, what, err, errsz);
        }
        if (first)
                *first = ci->Delivered.Stream + 1;
        jsConsumerInfo_Destroy(ci);
        return NATS_CHECK_OK;
}

static natsStatus info(struct nats_link *l, const struct config *cfg, size_t t, jsConsumerInfo **ci, jsErrCode *jerr)
{
        char name[256];
        nats_consumer_name(cfg, t, name, sizeof(name));
        return js_GetConsumerInfo(ci, l->js, nats_conf(cfg)->stream, name, NULL, jerr);
}

static int not_found(natsStatus s, jsErrCode jerr) { return s == NATS_NOT_FOUND || jerr == JSConsumerNotFoundErr; }

enum nats_check_rc nats_consumer_reset(struct nats_link *l, const struct config *cfg, size_t t, int64_t start,
                                       int64_t *first, char *err, size_t errsz)
{
        jsErrCode jerr = 0;
        char name[256];
        uint64_t f = 0;
        nats_consumer_name(cfg, t, name, sizeof(name));
        natsStatus s = js_DeleteConsumer(l->js, nats_conf(cfg)->stream, name, NULL, &jerr);
        if (s != NATS_OK && !not_found(s, jerr)) {
                char what[400];
                snprintf(what, sizeof(what), "deleting consumer %s", name);
                return failed(s, jerr, what, err, errsz);
        }
        enum nats_check_rc rc = create(l, cfg, t, start, &f, err, errsz);
        if (first)
                *first = (int64_t)f;
        return rc;
}

/* A consumer of that name dedupd did not make as it makes them: a push
 * consumer (pull requests would be refused), or one of other subjects
 * (its messages would be taken for the topic's). */
static int not_ours(const jsConsumerInfo *ci, const char *subject, char *err, size_t errsz)
{
        const jsConsumerConfig *cc = ci->Config;
        if (cc && cc->DeliverSubject && *cc->DeliverSubject) {
                snprintf(err, errsz,
                         "consumer %s is a push consumer (deliver subject %s): dedupd pulls; delete it, "
                         "or name dedupd's consumers otherwise (nats.durable)",
                         ci->Name, cc->DeliverSubject);
                return 1;
        }
        if (cc && cc->FilterSubject && *cc->FilterSubject && strcmp(cc->FilterSubject, subject)) {
                snprintf(err, errsz,
                         "consumer %s takes subject %s, not %s: delete it, or name dedupd's consumers "
                         "otherwise (nats.durable)",
                         ci->Name, cc->FilterSubject, subject);
                return 1;
        }
        return 0;
}

enum nats_check_rc nats_consumer_ensure(struct nats_link *l, const struct config *cfg, size_t t, int64_t start,
                                        char *err, size_t errsz)
{
        jsConsumerInfo *ci = NULL;
        jsErrCode jerr = 0;
        char name[256];
        natsStatus s = info(l, cfg, t, &ci, &jerr);
        nats_consumer_name(cfg, t, name, sizeof(name));
        if (not_found(s, jerr)) {
                if (start >= 1)
                        log_info("nats", "creating consumer %s (subject %s) at stream sequence %" PRId64, name,
                                 cfg->topics[t].name, start);
                else
                        log_info("nats", "creating consumer %s (subject %s) from the stream's first message", name,
                                 cfg->topics[t].name);
                return create(l, cfg, t, start, NULL, err, errsz);
        }
        if (s != NATS_OK) {
                char what[400];
                snprintf(what, sizeof(what), "consumer %s on stream %s", name, nats_conf(cfg)->stream);
                return failed(s, jerr, what, err, errsz);
        }
        if (not_ours(ci, cfg->topics[t].name, err, errsz)) {
                jsConsumerInfo_Destroy(ci);
                return NATS_CHECK_FAILED;
        }
        uint64_t floor = ci->AckFloor.Stream, delivered = ci->Delivered.Stream;
        int acked_any = ci->AckFloor.Consumer > 0;
        int64_t in_flight = ci->NumAckPending;
        jsConsumerInfo_Destroy(ci);
        /* Below the acknowledged floor everything was acknowledged after its
         * COMMIT; above it a delivery may have been lost on its way (the
         * database's position is only the highest sequence committed). So
         * the consumer starts after its floor, or at the database's position
         * where that is lower (dedupctl replay moved it back). A consumer that
         * has acknowledged nothing yet reports no floor: untouched, it stands
         * after what it delivered; holding deliveries, where it began is not
         * known, and they come back after ack_wait. */
        int64_t at;
        if (acked_any)
                at = (int64_t)floor + 1;
        else if (!in_flight)
                at = (int64_t)delivered + 1;
        else {
                log_info("nats",
                         "consumer %s: %" PRId64 " delivered, none acknowledged yet: they are delivered "
                         "again after ack_wait",
                         name, in_flight);
                return NATS_CHECK_OK;
        }
        if (start >= 1 && start < at)
                at = start;
        /* Nothing in flight and standing there: it goes on as it is. */
        if (!in_flight && (uint64_t)at == delivered + 1)
                return NATS_CHECK_OK;
        /* A dead predecessor's deliveries would come back only after ack_wait:
         * start again now (what was committed comes back and is absorbed). */
        log_info("nats",
                 "consumer %s: acknowledged up to %" PRIu64 ", delivered up to %" PRIu64 ", %" PRId64
                 " in flight, the database at %" PRId64 ": creating it again at stream sequence %" PRId64,
                 name, floor, delivered, in_flight, start, at);
        return nats_consumer_reset(l, cfg, t, at, NULL, err, errsz);
}

enum nats_check_rc nats_consumer_state(struct nats_link *l, const struct config *cfg, size_t t,
                                       struct nats_consumer_state *st, char *err, size_t errsz)
{
        jsConsumerInfo *ci = NULL;
        jsErrCode jerr = 0;
        natsStatus s = info(l, cfg, t, &ci, &jerr);
        memset(st, 0, sizeof(*st));
        if (not_found(s, jerr))
                return NATS_CHECK_OK;
        if (s != NATS_OK)
                return failed(s, jerr, "consumer info", err, errsz);
        *st = (struct nats_consumer_state){.found = 1,
                                           .ack_floor = ci->AckFloor.Stream,
                                           .delivered = ci->Delivered.Stream,
                                           .pending = ci->NumPending,
                                           .ack_pending = ci->NumAckPending,
                                           .waiting = ci->NumWaiting};
        jsConsumerInfo_Destroy(ci);
        return NATS_CHECK_OK;
}

/* The time of the first message at or after seq (and its sequence), or 0 past the end. */
static int time_at(struct nats_link *l, const struct config *cfg, uint64_t *seq, uint64_t last, int64_t *ns, char *err,
                   size_t errsz)
{
        for (; *seq <= last; (*seq)++) {
                natsMsg *m = NULL;
                jsErrCode jerr = 0;
                natsStatus s = js_GetMsg(&m, l->js, nats_conf(cfg)->stream, *seq, NULL, &jerr);
                if (s == NATS_OK) {
                        *ns = natsMsg_GetTime(m);
                        natsMsg_Destroy(m);
                        return 1;
                }
                if (s != NATS_NOT_FOUND && jerr != JSNoMessageFoundErr) {
                        failed(s, jerr, "reading the stream", err, errsz);
                        return -1;
                }
        }
        return 0; /* deleted up to the end */
}

enum nats_check_rc nats_seq_at_time(struct nats_link *l, const struct config *cfg, int64_t ms, int64_t *seq, char *err,
                                    size_t errsz)
{
        jsStreamInfo *si = NULL;
        jsErrCode jerr = 0;
        natsStatus s = js_GetStreamInfo(&si, l->js, nats_conf(cfg)->stream, NULL, &jerr);
        if (s != NATS_OK)
                return failed(s, jerr, "stream info", err, errsz);
        uint64_t lo = si->State.FirstSeq ? si->State.FirstSeq : 1, hi = si->State.LastSeq + 1, last = si->State.LastSeq;
        jsStreamInfo_Destroy(si);
        /* A stream's timestamps do not go down with its sequence: the first at or after ms. */
        while (lo < hi) {
                uint64_t mid = lo + (hi - lo) / 2, at = mid;
                int64_t ns = 0;
                int found = time_at(l, cfg, &at, hi - 1 < last ? hi - 1 : last, &ns, err, errsz);
                if (found < 0)
                        return NATS_CHECK_FAILED;
                if (!found || ns >= ms * 1000000)
                        hi = mid;
                else
                        lo = at + 1;
        }
        *seq = (int64_t)lo;
        return NATS_CHECK_OK;
}
