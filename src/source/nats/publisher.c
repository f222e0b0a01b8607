/* publisher: the NATS sink — the outbox and dead letters published through JetStream, each handed back only with its PubAck; or AckTerm. */
#include "source/nats/publisher.h"
#include "source/nats/destination.h"

#include "base/log.h"
#include "base/mem.h"
#include "source/nats/pull.h"
#include "source/nats/settings.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nats/nats.h>

struct nats_publisher {
        struct nats_link *link;
        const struct config *cfg;
};

/* A header value as NATS carries it: text on one line. */
static natsStatus add_header(natsMsg *m, const char *name, const void *val, size_t len)
{
        char *v = xmalloc(len + 1);
        for (size_t i = 0; i < len; i++) {
                char c = ((const char *)val)[i];
                v[i] = (c == '\r' || c == '\n' || c == '\0') ? ' ' : c;
        }
        v[len] = '\0';
        natsStatus s = natsMsgHeader_Add(m, name, v);
        free(v);
        return s;
}

/* Publish m and wait for the stream to have it (opts NULL: the context's
 * wait); *st gets the client's status. */
static int publish_acked(struct nats_publisher *p, natsMsg *m, jsPubOptions *opts, natsStatus *st, char *err,
                         size_t errsz)
{
        jsPubAck *pa = NULL;
        jsErrCode jerr = 0;
        char why[512];
        natsStatus s = js_PublishMsg(&pa, p->link->js, m, opts, &jerr);
        *st = s;
        if (s != NATS_OK) {
                snprintf(err, errsz, "publishing to %s: %s%s", natsMsg_GetSubject(m),
                         nats_link_error(s, jerr, why, sizeof(why)),
                         s == NATS_NO_RESPONDERS ? " (no stream captures this subject)" : "");
                return -1;
        }
        jsPubAck_Destroy(pa);
        return 0;
}

/* Publish m, built with status s (what: "a message", "a dead letter"), and
 * wait for its PubAck; m is destroyed either way. *st: the publish's status
 * (NATS_OK when it was never published). */
static int send_built(struct nats_publisher *p, natsStatus s, natsMsg *m, jsPubOptions *opts, const char *what,
                      natsStatus *st, char *err, size_t errsz)
{
        int rc;
        *st = NATS_OK;
        if (s != NATS_OK) {
                snprintf(err, errsz, "building %s: %s", what, natsStatus_GetText(s));
                natsMsg_Destroy(m);
                return -1;
        }
        rc = publish_acked(p, m, opts, st, err, errsz);
        natsMsg_Destroy(m);
        return rc;
}

/* A record as a NATS message: its headers, and its key as dedupd.record.key. */
static natsStatus message_of(natsMsg **m, const struct record *r)
{
        natsStatus s = natsMsg_Create(m, r->topic, NULL, r->value, (int)r->value_len);
        for (size_t h = 0; s == NATS_OK && h < r->header_cnt; h++)
                s = add_header(*m, r->headers[h].name, r->headers[h].value ? r->headers[h].value : "",
                               r->headers[h].value ? r->headers[h].value_len : 0);
        if (s == NATS_OK && r->key)
                s = add_header(*m, NATS_RECORD_KEY_HEADER, r->key, r->key_len);
        return s;
}

/* No responders is the server saying at once that nothing takes the
 * subject: no stream captures it — or JetStream itself does not answer yet (a
 * server that just restarted recovers its streams before it serves them).
 * The account's JetStream info tells the two apart. */
static int jetstream_answers(struct nats_publisher *p)
{
        jsAccountInfo *ai = NULL;
        jsErrCode jerr = 0;
        natsStatus s = js_GetAccountInfo(&ai, p->link->js, NULL, &jerr);
        if (s == NATS_OK)
                jsAccountInfo_Destroy(ai);
        return s == NATS_OK;
}

/* The server is gone, did not answer, or its JetStream is not serving yet:
 * the record was not refused, only not sent (it does not count towards
 * outbox.max_failures). */
static int no_answer(struct nats_publisher *p, natsStatus st)
{
        if (st == NATS_NO_RESPONDERS)
                return !jetstream_answers(p);
        return nats_link_unreachable(st) || st == NATS_NOT_YET_CONNECTED;
}

/* The outbox, one record at a time, each waiting at most
 * outbox.publish_timeout_ms for its PubAck. Each goes with its msg_id as
 * Nats-Msg-Id: a stream that had it within its duplicate window answers
 * with a PubAck that says Duplicate and stores nothing. A record no stream
 * takes is refused at once (no responders) and the next goes on; a server
 * that is gone, does not answer or whose JetStream is not serving yet leaves
 * this one and the rest unsent. */
static void publish(void *opaque, const struct record *recs, size_t n, struct sink_outcome *out)
{
        struct nats_publisher *p = opaque;
        jsPubOptions opts;
        size_t i = 0;
        jsPubOptions_Init(&opts);
        opts.MaxWait = p->cfg->outbox_publish_timeout_ms;
        for (; i < n; i++) {
                opts.MsgId = recs[i].msg_id;
                natsMsg *m = NULL;
                natsStatus st;
                char what[300];
                natsStatus s = message_of(&m, &recs[i]);
                snprintf(what, sizeof(what), "a message for %s", recs[i].topic);
                if (!send_built(p, s, m, &opts, what, &st, out[i].reason, sizeof(out[i].reason))) {
                        out[i].fate = SINK_ACKED;
                        continue;
                }
                if (no_answer(p, st)) {
                        out[i].fate = SINK_UNSENT;
                        break;
                }
                out[i].fate = SINK_FAILED;
        }
        if (i >= n)
                return;
        char why[sizeof(out->reason)];
        snprintf(why, sizeof(why), "not tried: %s", out[i].reason);
        for (size_t k = i + 1; k < n; k++) {
                out[k].fate = SINK_UNSENT;
                snprintf(out[k].reason, sizeof(out[k].reason), "%s", why);
        }
}

#define HDR(m, name, text) (s == NATS_OK ? (s = add_header((m), (name), (text), strlen(text))) : s)

/* The original's headers and body, and dedupd's: why, from where, which key. */
/* How a dead letter is cut when the whole does not fit the server's max_payload. */
struct cut {
        size_t keep;    /* bytes of the value kept */
        int bare;       /* the original's headers and value left out: dedupd's headers only */
        char note[320]; /* dedupd.truncated */
        char size[24];  /* dedupd.original.size */
};

/* The original's headers and body (or what cut keeps of them), and dedupd's:
 * why, from where, which key. */
static natsStatus letter_of(const struct nats_publisher *p, natsMsg **out, const struct pl_dead_letter *dl,
                            const char *subject, const char *ns, const struct cut *c)
{
        const struct pl_msg *pm = dl->msg;
        natsMsg *orig = pm->source;
        char seq[32], ts[32];
        snprintf(seq, sizeof(seq), "%" PRId64, pm->offset);
        snprintf(ts, sizeof(ts), "%" PRId64, pm->timestamp_ms);
        natsStatus s = natsMsg_Create(out, subject, NULL, c && c->bare ? NULL : pm->value,
                                      (int)(c ? (c->bare ? 0 : c->keep) : pm->value_len));
        for (size_t h = 0; s == NATS_OK && !(c && c->bare) && h < pm->header_cnt; h++)
                s = add_header(*out, pm->headers[h].name, pm->headers[h].value, pm->headers[h].value_len);
        HDR(*out, "dedupd.reason", dl->reason);
        HDR(*out, "dedupd.origin.topic", pm->topic);
        HDR(*out, "dedupd.origin.subject", natsMsg_GetSubject(orig));
        HDR(*out, "dedupd.origin.stream", nats_conf(p->cfg)->stream);
        HDR(*out, "dedupd.origin.sequence", seq);
        HDR(*out, "dedupd.origin.timestamp", ts);
        HDR(*out, "dedupd.namespace", ns);
        if (dl->idem_key)
                HDR(*out, "dedupd.key", dl->idem_key);
        if (dl->fingerprint)
                HDR(*out, "dedupd.fingerprint.message", dl->fingerprint);
        if (dl->stored_fingerprint)
                HDR(*out, "dedupd.fingerprint.stored", dl->stored_fingerprint);
        if (c) {
                HDR(*out, "dedupd.truncated", c->note);
                HDR(*out, "dedupd.original.size", c->size);
        }
        return s;
}

/* The bytes m's headers take on the wire ("NATS/1.0", "Name: value" lines). */
static size_t header_size(natsMsg *m)
{
        const char **keys = NULL;
        int nk = 0;
        size_t n = 16;
        if (natsMsgHeader_Keys(m, &keys, &nk) != NATS_OK)
                return n;
        for (int k = 0; k < nk; k++) {
                const char **vals = NULL;
                int nv = 0;
                if (natsMsgHeader_Values(m, keys[k], &vals, &nv) != NATS_OK)
                        continue;
                for (int v = 0; v < nv; v++)
                        n += strlen(keys[k]) + strlen(vals[v]) + 4;
                free((void *)vals);
        }
        free((void *)keys);
        return n;
}

/* Too large for the server (max_payload): keep what fits of the value; when
 * not even the headers fit, dedupd's headers alone. The whole message stays
 * at its origin in the stream. */
static natsStatus letter_cut(const struct nats_publisher *p, natsMsg **out, const struct pl_dead_letter *dl,
                             const char *subject, const char *ns, struct cut *c)
{
        const struct pl_msg *pm = dl->msg;
        int64_t max = natsConnection_GetMaxPayload(p->link->nc);
        natsMsg *probe = NULL;
        *c = (struct cut){0};
        snprintf(c->size, sizeof(c->size), "%zu", pm->value_len);
        memset(c->note, 'x', sizeof(c->note) - 1); /* as long as the note can be */
        size_t hdrs = letter_of(p, &probe, dl, subject, ns, c) == NATS_OK ? header_size(probe) : (size_t)max;
        natsMsg_Destroy(probe);
        if ((int64_t)hdrs + 64 < max) {
                c->keep = (size_t)(max - (int64_t)hdrs - 64);
                snprintf(c->note, sizeof(c->note),
                         "value cut to its first %zu of %zu bytes: the server takes messages of "
                         "at most %" PRId64 " bytes (max_payload); the whole message stays at its origin",
                         c->keep, pm->value_len, max);
        } else {
                c->bare = 1;
                snprintf(c->note, sizeof(c->note),
                         "headers and value left out (%zu-byte value): the message does not fit "
                         "the server's max_payload (%" PRId64 " bytes); the whole message stays at its origin",
                         pm->value_len, max);
        }
        return letter_of(p, out, dl, subject, ns, c);
}

static int terminate(struct nats_publisher *p, const struct pl_dead_letter *letters, size_t n, char *err, size_t errsz)
{
        for (size_t i = 0; i < n; i++) {
                const struct pl_msg *m = letters[i].msg;
                natsStatus s = nats_pull_term(p->link->nc, m->source);
                if (s != NATS_OK) {
                        snprintf(err, errsz, "AckTerm of %s sequence %" PRId64 ": %s", m->topic, m->offset,
                                 natsStatus_GetText(s));
                        return -1;
                }
        }
        return 0;
}

static int dead_letter(void *opaque, const char *dlq_topic, const char *ns, const struct pl_dead_letter *letters,
                       size_t n, char *err, size_t errsz)
{
        struct nats_publisher *p = opaque;
        const char *subject = nats_conf(p->cfg)->dlq_subject;
        (void)dlq_topic; /* nats.dead_letter.subject, for every topic */
        if (!subject || !*subject)
                return terminate(p, letters, n, err, errsz);
        for (size_t i = 0; i < n; i++) {
                natsMsg *m = NULL;
                struct cut c;
                natsStatus st, s = letter_of(p, &m, &letters[i], subject, ns, NULL);
                if (!send_built(p, s, m, NULL, "a dead letter", &st, err, errsz))
                        continue;
                if (st != NATS_MAX_PAYLOAD)
                        return -1;
                log_warn("nats", "dead letter of %s sequence %" PRId64 " is over the server's max_payload: cut to fit",
                         letters[i].msg->topic, letters[i].msg->offset);
                s = letter_cut(p, &m, &letters[i], subject, ns, &c);
                if (send_built(p, s, m, NULL, "a dead letter", &st, err, errsz))
                        return -1;
        }
        return 0;
}

struct nats_publisher *nats_publisher_new(struct nats_link *link, const struct config *cfg)
{
        struct nats_publisher *p = xcalloc(1, sizeof(*p));
        p->link = link;
        p->cfg = cfg;
        return p;
}

void nats_publisher_free(struct nats_publisher *p) { free(p); }

struct sink nats_sink(struct nats_publisher *p)
{
        return (struct sink){.publish = publish, .dead_letter = dead_letter, .opaque = p, .check = nats_record_check};
}
