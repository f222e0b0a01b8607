/* dlq: the dead-letter producer — a message is handed back only once the broker acknowledged it. */
#ifndef DEDUPD_DLQ_H
#define DEDUPD_DLQ_H

#include <stddef.h>

#include "config.h"
#include "pipeline.h"

struct dlq;

struct dlq *dlq_new(const struct config *cfg, char *err, size_t errsz)
        __attribute__((warn_unused_result));
void dlq_free(struct dlq *q);

/** pl_dlq_ops.dead_letter: produce each message unchanged (key, value,
 *  headers) plus dedupd.* headers naming the reason and the origin, and
 *  wait for every acknowledgement. */
int dlq_send(void *opaque, const char *dlq_topic, const char *ns, struct pl_msg *const *msgs,
             size_t n, char *err, size_t errsz);

/** Properties of the `kafka:` map that only make sense for a consumer. */
int dlq_is_consumer_property(const char *name);

#endif
