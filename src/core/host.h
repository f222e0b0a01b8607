/* host: the versioned host-API table handed to handlers, and the contexts behind it. */
#ifndef DEDUPD_HOST_H
#define DEDUPD_HOST_H

#include <jansson.h>

#include "dedupd/handler.h"
#include "pg/handler_conn.h"

struct sink;

/* Each context begins with the host table and its store (pg/handler_conn.h):
 * DEDUPD_HOST(ctx) reads the one, host->conn and host->init_conn hand out the
 * other's connection, host->exec runs on it and keeps the rows there until
 * host_ctx_release. */
struct dedupd_ctx {
        struct store_handler_ctx head; /* first: the store the handler runs on, also dedupd's own statements' (emit) */
        const char *idem_key;
        const char *log_prefix; /* "handler:transfer" */
        char *response;         /* owned; NULL when the handler set none */
        size_t response_len;
        const char *ns;          /* namespace; NULL where emit is not available (external mode) */
        const struct sink *sink; /* where emits are published: what it cannot take is refused at emit */
        int emitted;             /* messages written to the outbox: the next emit's number (base/msgid.h) */
        int refused_responses, refused_emits; /* calls refused: counted once the outcome commits */
};

struct dedupd_init_ctx {
        struct store_handler_ctx head; /* first: the setup connection's store */
        const json_t *config;
        const char *log_prefix;
        const char *ns, *topic; /* whose handler this is (set_evidence); NULL: none to declare for */
        const char *handler;    /* its name */
        char error[512];        /* the last failure of a host call: init()'s message when it gave none */
};

extern const struct dedupd_host host_api;

/** Count ctx's refused calls: its message's outcome has committed (an attempt
 *  that rolled back counts nothing; the metrics are the database's truth). */
void host_count_refusals(const struct dedupd_ctx *ctx);

/** Free what the handler's statements returned during its call (host->exec). */
void host_ctx_release(struct store_handler_ctx *head);

/** Forget the previous message's response. */
void host_ctx_reset(struct dedupd_ctx *ctx);

#endif
