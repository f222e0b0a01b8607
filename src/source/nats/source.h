/* source: the NATS JetStream source — one durable pull consumer per topic, messages handed over, each acknowledged after COMMIT. */
#ifndef DEDUPD_SOURCE_NATS_SOURCE_H
#define DEDUPD_SOURCE_NATS_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "core/source.h"
#include "source/nats/link.h"

/**
 * Each topic (a subject of nats.stream) as partition 0 of itself, its
 * offsets the stream sequence. On the first poll the runner is told the
 * assignment and says where each topic starts (the database's position);
 * each topic's consumer is put there (nats_consumer_ensure) and pulled.
 * The link stays the caller's and must outlive the source.
 */
struct source *nats_source_new(const struct config *cfg, struct nats_link *link, struct source_events ev, char *err,
                               size_t errsz) __attribute__((warn_unused_result));

/** Startup ends when every topic's consumer is in place; past deadline_ms
 *  (log_now_ms()'s clock; 0: none) failure() says why. */
void nats_source_set_startup_deadline(struct source *src, int64_t deadline_ms, int timeout_ms);

#endif
