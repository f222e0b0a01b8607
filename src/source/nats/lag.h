/* lag: dedupctl verify's lag on NATS — each subject's last sequence, dedupd's position and the consumer's backlog. */
#ifndef DEDUPD_SOURCE_NATS_LAG_H
#define DEDUPD_SOURCE_NATS_LAG_H

#include <stddef.h>

#include "base/config.h"
#include "pg/store.h"

/** Prints the table; with expect_caught_up, each subject not caught up is
 *  handed to finding (one line each). -1 with err when a server or the
 *  database did not answer. */
int nats_lag(struct store *s, const struct config *cfg, FILE *out, int expect_caught_up,
             void (*finding)(void *opaque, const char *line), void *opaque, char *err, size_t errsz);

#endif
