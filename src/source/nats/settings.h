/* settings: NATS JetStream's own part of the configuration — the `nats:` rows and their checks. */
#ifndef DEDUPD_SOURCE_NATS_SETTINGS_H
#define DEDUPD_SOURCE_NATS_SETTINGS_H

#include "base/config_impl.h"

struct nats_settings {
        char *url; /* secret: it may carry user:password or a token */
        char *stream;
        char *durable; /* "" : dedupd-<namespace> */
        int max_ack_pending;
        int ack_wait_ms;
        char *creds_file;
        char *token;
        char *tls_ca;
        char *dlq_subject; /* "" : unkeyable messages are terminated (AckTerm) */
};

/** NATS as the configuration knows it (its row in the broker table). */
extern const struct config_broker nats_config;

/** The nats: settings of cfg. */
const struct nats_settings *nats_conf(const struct config *cfg);

#endif
