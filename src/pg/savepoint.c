/* savepoint: the mark inside a batch's transaction that lets one message's changes be undone alone. */
#include "pg/savepoint.h"

static const char *const statements[] = {
        [STORE_SAVEPOINT_SET] = "SAVEPOINT dedupd_msg",
        [STORE_SAVEPOINT_UNDO] = "ROLLBACK TO SAVEPOINT dedupd_msg",
        [STORE_SAVEPOINT_NEXT] = "RELEASE SAVEPOINT dedupd_msg; SAVEPOINT dedupd_msg",
};

enum store_rc store_savepoint(struct store *s, enum store_savepoint op, char *err, size_t errsz)
{
        return store_exec(s, statements[op], err, errsz);
}
