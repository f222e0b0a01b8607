/* savepoint: the mark inside a batch's transaction that lets one message's changes be undone alone. */
#ifndef DEDUPD_PG_SAVEPOINT_H
#define DEDUPD_PG_SAVEPOINT_H

#include <stddef.h>

#include "pg/store.h"

/** What to do with the message's mark (there is one, dedupd's own). */
enum store_savepoint {
        STORE_SAVEPOINT_SET,  /* mark: what follows can be undone */
        STORE_SAVEPOINT_UNDO, /* undo what followed the mark (the mark stays) */
        STORE_SAVEPOINT_NEXT, /* keep what followed the mark, and mark again: one round trip */
};

/** A handler released or rolled back the mark, or ended the transaction:
 *  the statement fails (anything but STORE_CONN is then the handler's doing). */
enum store_rc store_savepoint(struct store *s, enum store_savepoint op, char *err, size_t errsz)
        __attribute__((warn_unused_result));

#endif
