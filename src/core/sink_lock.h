/* sink_lock: a sink several threads may call — each call made alone (partition workers write dead letters and replies beside the relay). */
#ifndef DEDUPD_CORE_SINK_LOCK_H
#define DEDUPD_CORE_SINK_LOCK_H

#include <pthread.h>

#include "core/source.h"

struct sink_lock {
        struct sink inner;
        pthread_mutex_t lock;
};

/** A sink that calls inner's operations one at a time, whichever thread
 *  calls; l holds the lock and must outlive it (sink_lock_destroy). */
struct sink sink_locked(struct sink_lock *l, struct sink inner);
void sink_lock_destroy(struct sink_lock *l);

#endif
