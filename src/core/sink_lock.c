/* sink_lock: a sink several threads may call — each call made alone (partition workers write dead letters and replies beside the relay). */
#include "core/sink_lock.h"

static void locked_publish(void *opaque, const struct record *recs, size_t n, struct sink_outcome *out)
{
        struct sink_lock *l = opaque;
        pthread_mutex_lock(&l->lock);
        l->inner.publish(l->inner.opaque, recs, n, out);
        pthread_mutex_unlock(&l->lock);
}

static int locked_dead_letter(void *opaque, const char *dlq_topic, const char *ns, const struct pl_dead_letter *letters,
                              size_t n, char *err, size_t errsz)
{
        struct sink_lock *l = opaque;
        pthread_mutex_lock(&l->lock);
        int rc = l->inner.dead_letter(l->inner.opaque, dlq_topic, ns, letters, n, err, errsz);
        pthread_mutex_unlock(&l->lock);
        return rc;
}

static int locked_check(void *opaque, const struct record *rec, char *why, size_t whysz)
{
        struct sink_lock *l = opaque;
        pthread_mutex_lock(&l->lock);
        int rc = l->inner.check(l->inner.opaque, rec, why, whysz);
        pthread_mutex_unlock(&l->lock);
        return rc;
}

struct sink sink_locked(struct sink_lock *l, struct sink inner)
{
        l->inner = inner;
        pthread_mutex_init(&l->lock, NULL);
        return (struct sink){.publish = locked_publish,
                             .dead_letter = locked_dead_letter,
                             .opaque = l,
                             .check = inner.check ? locked_check : NULL};
}

void sink_lock_destroy(struct sink_lock *l) { pthread_mutex_destroy(&l->lock); }
