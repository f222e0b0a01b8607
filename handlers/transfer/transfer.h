/* transfer: what the transfer handler's halves share — the payment a message carries and the outcomes it gets. */
#ifndef DEDUPD_TRANSFER_H
#define DEDUPD_TRANSFER_H

#include <jansson.h>

#include <dedupd/handler.h>

#define TRANSFER_INVALID "invalid payment: need integer user_id and positive amount"
#define TRANSFER_UNCOVERED "insufficient balance"

/** {"order_id":"9527","user_id":1,"amount":10} -> 0, or -1 when malformed. */
int transfer_parse(const struct dedupd_msg *msg, json_int_t *user_id, json_int_t *amount);

/** Reject the message with why (its stored error). */
dedupd_result_t transfer_reject(struct dedupd_ctx *ctx, const char *why);

/** The applied message's response: "OK: debited 10". */
void transfer_debited(struct dedupd_ctx *ctx, json_int_t amount);

/** One message at a time (message.c). */
dedupd_result_t transfer_handle(void *state, struct dedupd_ctx *ctx, const struct dedupd_msg *msg);

/** The whole batch in a constant number of statements (batch.c). */
dedupd_result_t transfer_handle_batch(void *state, struct dedupd_ctx *const *ctxs, const struct dedupd_msg *const *msgs,
                                      size_t cnt, dedupd_result_t *results);

#endif
