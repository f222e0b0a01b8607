/* invoke: the handler inside dedupd's batch transaction — one message at a time under savepoints, or set-oriented — and the checks that it left the transaction and the session as dedupd's. */
#ifndef DEDUPD_CORE_INVOKE_H
#define DEDUPD_CORE_INVOKE_H

#include <stddef.h>

#include "core/batch.h"
#include "core/mode.h"

/**
 * Step 6 of a transactional batch: the handler on b's fresh items, in
 * batch order, each item ending ITEM_APPLIED or ITEM_REJECTED. Then the
 * session is reset to dedupd's (pg/session.h) and the commit guard taken
 * off. PL_RETRY: rolled back, the message that asked for it (or broke the
 * transaction) has counted an attempt; PL_SPLIT: rolled back, the handler
 * broke the batch without naming a message; PL_DB_DOWN.
 */
enum pl_rc invoke_handler(struct pl_topic *pt, struct batch *b, char *err, size_t errsz);

#endif
