/* reply: a message's outcome to the destination its reply header names — read, checked (the broker can take it, reply.allow lets it) and written to the outbox. */
#ifndef DEDUPD_CORE_REPLY_H
#define DEDUPD_CORE_REPLY_H

#include "core/mode.h"
#include "pg/key_status.h"
#include "pg/store.h"

/** m's header name (the last one of that name), or NULL. */
const struct dedupd_header *reply_header(const struct pl_msg *m, const char *name);

/** 1 when m asks for a reply (its topic's reply header, not empty). */
int reply_wanted(const struct topic_conf *t, const struct pl_msg *m);

/**
 * Write the reply to m (of key idem_key) — status, response (may be
 * NULL), whether m was a duplicate — to the outbox, in the batch's
 * transaction. A destination
 * that is not UTF-8, not a name the broker takes, one of dedupd's own
 * topics or outside reply.allow gets no reply: logged, *written 0 and
 * *refused_kind "invalid" or "not_allowed" (else NULL), for the caller to
 * count once the batch commits (the message is applied all the same). A
 * failed statement is the returned store_rc.
 */
enum store_rc reply_write(struct pl_topic *pt, const struct pl_msg *m, const char *idem_key, enum key_status status,
                          const char *response, int duplicate, int *written, const char **refused_kind, char *err,
                          size_t errsz) __attribute__((warn_unused_result));

#endif
