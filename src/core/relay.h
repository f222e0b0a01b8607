/* relay: publishes what committed batches wrote to the outbox, and settles each row by what the broker said of it. */
#ifndef DEDUPD_CORE_RELAY_H
#define DEDUPD_CORE_RELAY_H

#include <stddef.h>

#include "base/config.h"
#include "core/source.h"
#include "pg/store.h"

/** What one round did. */
struct relay_round {
        size_t taken;            /* rows taken */
        size_t sent;             /* acknowledged, and marked sent */
        size_t failed;           /* refused: counted, to be retried after a backoff */
        size_t given_up;         /* of those, given up by this round */
        size_t unsent;           /* not tried, or not answered: the broker is in trouble */
        char unsent_reason[256]; /* why, for the first of them */
};

/**
 * Publish up to outbox.batch due rows of the namespace, oldest first, and
 * settle each by the broker's answer in one statement before COMMIT: an
 * acknowledged row is marked sent, so a later row's failure never publishes
 * it again; a refused row is counted, retried after a backoff (the rows
 * behind it go on meanwhile) and given up at outbox.max_failures, logged
 * once at ERROR. An unsent row stays as it was. Rows are locked with SKIP
 * LOCKED, so several relays share the work. Each carries dedupd.outbox.id,
 * its msg_id (also the broker's own dedup id where it has one), and
 * dedupd.key: a crash or a lost COMMIT after the broker acknowledged
 * publishes it again, under the same identity. Returns 0 with *rd filled, or -1 when the database
 * failed (the round rolled back; its rows are taken again).
 */
int relay_run(struct store *s, const struct sink *sink, const struct config *cfg, struct relay_round *rd, char *err,
              size_t errsz);

#endif
