/* pull: a durable pull consumer fetched by hand — pull requests, their replies on an inbox of its own, acks on each message's reply subject. */
#ifndef DEDUPD_SOURCE_NATS_PULL_H
#define DEDUPD_SOURCE_NATS_PULL_H

#include <nats/nats.h>

struct nats_pull;

/** A pull of consumer on stream over nc (which must outlive it): its inbox
 *  subscribed to. The consumer must exist (nats_consumer_ensure). */
natsStatus nats_pull_open(struct nats_pull **out, natsConnection *nc, const char *stream, const char *consumer);
void nats_pull_close(struct nats_pull *p);

/** At most batch messages of the stream into msgs (room for batch), *got of
 *  them, within timeout_ms: what earlier requests brought first, then what
 *  the server has now, then the first that comes. NATS_OK when *got > 0;
 *  NATS_TIMEOUT when nothing came; else why (msgs then hold *got anyway). */
natsStatus nats_pull_fetch(struct nats_pull *p, natsMsg **msgs, int batch, int timeout_ms, int *got);

/** Acknowledge m (+ACK), or terminate it (+TERM: never delivered again), on
 *  nc; sent asynchronously, as natsMsg_Ack and natsMsg_Term do. */
natsStatus nats_pull_ack(natsConnection *nc, natsMsg *m);
natsStatus nats_pull_term(natsConnection *nc, natsMsg *m);

#endif
