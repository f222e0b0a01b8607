/* publisher: the NATS sink — the outbox and dead letters published through JetStream, each handed back only with its PubAck; or AckTerm. */
#ifndef DEDUPD_SOURCE_NATS_PUBLISHER_H
#define DEDUPD_SOURCE_NATS_PUBLISHER_H

#include "base/config.h"
#include "core/source.h"
#include "source/nats/link.h"

struct nats_publisher;

/** What the protocol publishes, through the link (which must outlive it). */
struct nats_publisher *nats_publisher_new(struct nats_link *link, const struct config *cfg);
void nats_publisher_free(struct nats_publisher *p);

/** The publisher as the protocol's sink: a record's topic is its subject;
 *  dead letters go to nats.dead_letter.subject with dedupd.* headers (the
 *  PubAck awaited), or are terminated (AckTerm) when it is empty. */
struct sink nats_sink(struct nats_publisher *p);

#endif
