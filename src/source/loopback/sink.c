/* sink: the loopback broker's producer side — dead letters and outbox publishes recorded, refused or left unsent as the test says. */
#include "source/loopback/state.h"

#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *text_dup(const void *p, size_t n)
{
        char *s = xmalloc(n + 1);
        if (n)
                memcpy(s, p, n);
        s[n] = '\0';
        return s;
}

static void dead_add(struct loopback *lb, const char *dlq_topic, const struct pl_dead_letter *dl)
{
        const struct pl_msg *m = dl->msg;
        lb->dead = xrealloc(lb->dead, (lb->dead_cnt + 1) * sizeof(*lb->dead));
        lb->dead[lb->dead_cnt++] = (struct loopback_dead){.dlq_topic = xstrdup(dlq_topic),
                                                          .topic = xstrdup(m->topic),
                                                          .partition = m->partition,
                                                          .offset = m->offset,
                                                          .idem_key = dl->idem_key ? xstrdup(dl->idem_key) : NULL,
                                                          .reason = xstrdup(dl->reason),
                                                          .value = text_dup(m->value, m->value_len)};
}

static int dead_letter(void *opaque, const char *dlq_topic, const char *ns, const struct pl_dead_letter *letters,
                       size_t n, char *err, size_t errsz)
{
        struct loopback *lb = opaque;
        int rc = 0;
        pthread_mutex_lock(&lb->lock);
        if (lb->refuse_dead) {
                snprintf(err, errsz, "%s: %s", dlq_topic, lb->refuse_dead);
                rc = -1;
        }
        for (size_t i = 0; !rc && i < n; i++)
                dead_add(lb, dlq_topic, &letters[i]);
        pthread_mutex_unlock(&lb->lock);
        return rc;
}

static void publish(void *opaque, const struct record *recs, size_t n, struct sink_outcome *out)
{
        struct loopback *lb = opaque;
        pthread_mutex_lock(&lb->lock);
        for (size_t i = 0; i < n; i++) {
                out[i].fate = lb->fate;
                snprintf(out[i].reason, sizeof(out[i].reason), "%s", lb->fate == SINK_ACKED ? "" : lb->fate_why);
                lb->pubs = xrealloc(lb->pubs, (lb->pub_cnt + 1) * sizeof(*lb->pubs));
                lb->pubs[lb->pub_cnt++] =
                        (struct loopback_pub){.topic = xstrdup(recs[i].topic),
                                              .key = text_dup(recs[i].key, recs[i].key ? recs[i].key_len : 0),
                                              .value = text_dup(recs[i].value, recs[i].value ? recs[i].value_len : 0),
                                              .fate = lb->fate};
        }
        pthread_mutex_unlock(&lb->lock);
}

struct sink loopback_sink(struct loopback *lb)
{
        return (struct sink){.publish = publish, .dead_letter = dead_letter, .opaque = lb};
}

void loopback_refuse_dead_letters(struct loopback *lb, const char *why)
{
        pthread_mutex_lock(&lb->lock);
        free(lb->refuse_dead);
        lb->refuse_dead = why ? xstrdup(why) : NULL;
        pthread_mutex_unlock(&lb->lock);
}

void loopback_publish_fate(struct loopback *lb, enum sink_fate fate, const char *why)
{
        pthread_mutex_lock(&lb->lock);
        lb->fate = fate;
        snprintf(lb->fate_why, sizeof(lb->fate_why), "%s", why ? why : "");
        pthread_mutex_unlock(&lb->lock);
}

size_t loopback_dead_letters(struct loopback *lb, const struct loopback_dead **out)
{
        pthread_mutex_lock(&lb->lock);
        size_t n = lb->dead_cnt;
        *out = lb->dead;
        pthread_mutex_unlock(&lb->lock);
        return n;
}

size_t loopback_published(struct loopback *lb, const struct loopback_pub **out)
{
        pthread_mutex_lock(&lb->lock);
        size_t n = lb->pub_cnt;
        *out = lb->pubs;
        pthread_mutex_unlock(&lb->lock);
        return n;
}

void lb_sink_free(struct loopback *lb)
{
        for (size_t i = 0; i < lb->dead_cnt; i++) {
                struct loopback_dead *d = &lb->dead[i];
                free(d->dlq_topic);
                free(d->topic);
                free(d->idem_key);
                free(d->reason);
                free(d->value);
        }
        for (size_t i = 0; i < lb->pub_cnt; i++) {
                free(lb->pubs[i].topic);
                free(lb->pubs[i].key);
                free(lb->pubs[i].value);
        }
        free(lb->dead);
        free(lb->pubs);
        free(lb->refuse_dead);
}
