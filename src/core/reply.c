/* reply: a message's outcome to the destination its reply header names — read, checked (the broker can take it, reply.allow lets it) and written to the outbox. */
#include "core/reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/utf8.h"
#include "pg/outbox.h"

/* Longer than any broker's longest name: a longer one is refused unread. */
#define REPLY_DEST_MAX 4096

/* A producer can send a refused reply-to in every message: one line a second. */
static struct log_ratelimit refused_rl;

const struct dedupd_header *reply_header(const struct pl_msg *m, const char *name)
{
        const struct dedupd_header *h = NULL;
        for (size_t k = 0; k < m->header_cnt; k++)
                if (!strcmp(m->headers[k].name, name))
                        h = &m->headers[k];
        return h;
}

int reply_wanted(const struct topic_conf *t, const struct pl_msg *m)
{
        const struct dedupd_header *to;
        if (!t->reply_header || !*t->reply_header)
                return 0;
        to = reply_header(m, t->reply_header);
        return to && to->value && to->value_len;
}

/* dedupd's own topics: a reply there would feed itself, or fake a dead letter. */
static int own_topic(const struct config *cfg, const char *dest)
{
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                const struct topic_conf *t = &cfg->topics[i];
                if (!strcmp(t->name, dest) || (t->dlq_topic && !strcmp(t->dlq_topic, dest)))
                        return 1;
        }
        return 0;
}

/* reply.allow: unset allows any destination; else a name, or a prefix* of it. */
static int allowed(const struct topic_conf *t, const char *dest)
{
        size_t k;
        json_t *v;
        if (!t->reply_allow)
                return 1;
        json_array_foreach(t->reply_allow, k, v)
        {
                const char *a = json_string_value(v);
                size_t n = a ? strlen(a) : 0;
                if (n && a[n - 1] == '*' ? !strncmp(a, dest, n - 1) : a && !strcmp(a, dest))
                        return 1;
        }
        return 0;
}

/* Why rec may not go out as m's reply, or NULL; "not_allowed" or "invalid" in *kind. */
static const char *refusal(const struct pl_topic *pt, const struct record *rec, const char **kind, char *why,
                           size_t whysz)
{
        *kind = "not_allowed";
        if (own_topic(pt->cfg, rec->topic))
                return "it is one of dedupd's own topics";
        if (!allowed(pt->t, rec->topic))
                return "it is not in reply.allow";
        *kind = "invalid";
        if (pt->sink->check && pt->sink->check(pt->sink->opaque, rec, why, whysz))
                return why;
        return NULL;
}

/* Logged on each attempt; counted by the caller once the batch commits. */
static void refused(const struct pl_msg *m, const char *idem_key, const char *dest, const char *why)
{
        char mctx[256];
        snprintf(mctx, sizeof(mctx), "topic:%s/%d", m->topic, (int)m->partition);
        if (dest)
                log_limited(&refused_rl, 1, 1000, LOG_WARN, mctx,
                            "offset %lld: key %s: no reply to '%s': %s (the message is applied)", (long long)m->offset,
                            idem_key, dest, why);
        else
                log_limited(&refused_rl, 1, 1000, LOG_WARN, mctx,
                            "offset %lld: key %s: no reply: %s (the message is applied)", (long long)m->offset,
                            idem_key, why);
}

/* Which of the key's outputs m's reply is: the reply, where m applied the
 * key; a duplicate's, one per delivery (a caller that retried gets its own,
 * which no broker's dedup window drops as a copy of the first). */
static struct msgid_place reply_place(const struct pl_msg *m, int duplicate)
{
        if (!duplicate)
                return (struct msgid_place){.slot = MSGID_REPLY};
        return (struct msgid_place){
                .slot = MSGID_DUPLICATE_REPLY, .topic = m->topic, .partition = m->partition, .offset = m->offset};
}

enum store_rc reply_write(struct pl_topic *pt, const struct pl_msg *m, const char *idem_key, enum key_status status,
                          const char *response, int duplicate, int *written, const char **refused_kind, char *err,
                          size_t errsz)
{
        const struct dedupd_header *to = reply_header(m, pt->t->reply_header);
        const struct dedupd_header *corr = reply_header(m, pt->t->correlation_header);
        struct dedupd_header hdrs[3];
        const char *kind, *no;
        char why[512];
        size_t nh = 0;

        *written = 0;
        *refused_kind = NULL;
        if (to->value_len > REPLY_DEST_MAX || !utf8_text_ok(to->value, to->value_len)) {
                *refused_kind = "invalid";
                refused(m, idem_key, NULL,
                        to->value_len > REPLY_DEST_MAX ? "its reply-to is longer than any broker's names"
                                                       : "its reply-to is not UTF-8 text");
                return STORE_OK;
        }
        char *dest = xstrndup(to->value, to->value_len);
        if (corr)
                hdrs[nh++] = *corr;
        const char *status_text = key_status_name(status);
        hdrs[nh++] = (struct dedupd_header){"dedupd.status", status_text, strlen(status_text)};
        hdrs[nh++] = (struct dedupd_header){"dedupd.duplicate", duplicate ? "true" : "false", duplicate ? 4 : 5};
        const struct outbox_msg o = {idem_key,
                                     reply_place(m, duplicate),
                                     {dest, corr ? corr->value : NULL, corr ? corr->value_len : 0, response,
                                      response ? strlen(response) : 0, hdrs, nh, NULL, 0, NULL}};
        enum store_rc rc = STORE_OK;
        if ((no = refusal(pt, &o.rec, &kind, why, sizeof(why)))) {
                *refused_kind = kind;
                refused(m, idem_key, dest, no);
        } else if (!(rc = store_outbox_insert(pt->store, pt->cfg->namespace, &o, err, errsz)))
                *written = 1;
        free(dest);
        return rc;
}
