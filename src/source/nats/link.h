/* link: the one NATS connection and JetStream context of a process — built from the nats: section, reconnecting for ever, errors in words. */
#ifndef DEDUPD_SOURCE_NATS_LINK_H
#define DEDUPD_SOURCE_NATS_LINK_H

#include <stddef.h>
#include <stdint.h>

#include <nats/nats.h>

#include "base/config.h"

/** How long a tool or a check waits for one JetStream answer. */
#define NATS_TIMEOUT_MS 5000

struct nats_link {
        natsConnection *nc;
        jsCtx *js;
        char server[256]; /* the URL(s) with any credentials cut out: what messages name */
};

/** Connect as the nats: section says (token, credentials file, TLS CA);
 *  the connection then reconnects for ever. -1 with the client's message. */
int nats_link_open(struct nats_link *l, const struct config *cfg, char *err, size_t errsz)
        __attribute__((warn_unused_result));
void nats_link_close(struct nats_link *l);

/** The client's words for s (and the JetStream code, when set). */
const char *nats_link_error(natsStatus s, jsErrCode jerr, char *buf, size_t bufsz);

/** url with "user:password@" or "token@" removed, into buf. */
const char *nats_link_redact(const char *url, char *buf, size_t bufsz);

/** The durable consumer of topic t: <durable>-<subject> with . * > as _. */
const char *nats_consumer_name(const struct config *cfg, size_t t, char *buf, size_t bufsz);

/** 1 when s means the server could not be reached (not that it refused). */
int nats_link_unreachable(natsStatus s);

#endif
