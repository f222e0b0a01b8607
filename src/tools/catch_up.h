/* catch_up: dedupctl verify --wait — wait until dedupd has consumed and committed every record there is. */
#ifndef DEDUPD_TOOLS_CATCH_UP_H
#define DEDUPD_TOOLS_CATCH_UP_H

#include <stddef.h>

#include "base/config.h"
#include "pg/store.h"

enum catch_up_rc {
        CATCH_UP_DONE = 0,   /* lag 0 everywhere: the report now counts everything */
        CATCH_UP_BEHIND = 1, /* the wait ran out; what is behind was printed on stderr */
        CATCH_UP_ERROR = -1, /* the database or the broker did not answer at the last look (err) */
};

/** Asks the broker's lag op (and the database, for dedupd's position) once a
 *  second until nothing is behind or wait_s seconds have passed. A schema not
 *  there yet counts as behind (dedupd may still be starting), and so does a
 *  look the broker or the database failed, unless it is the last one. */
enum catch_up_rc catch_up_wait(struct store *s, const struct config *cfg, int wait_s, char *err, size_t errsz);

#endif
