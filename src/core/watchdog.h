/* watchdog: aborts a batch that runs too long — first its SQL, then the process. */
#ifndef DEDUPD_WATCHDOG_H
#define DEDUPD_WATCHDOG_H

#include <stddef.h>

struct store;
struct watchdog;

/** Start the watchdog thread. NULL when the thread cannot be created. */
struct watchdog *watchdog_start(char *err, size_t errsz);
void watchdog_stop(struct watchdog *w);

/**
 * A batch transaction starts on s's connection. When it is still running after
 * timeout_ms, its running statement is cancelled (the handler sees an
 * error, the batch rolls back and is retried). When it is still running
 * max(timeout_ms / 2, 2 s) after that — stuck outside SQL — the process
 * exits with code 4: the database rolls the transaction back, the message
 * is redelivered, and the crash-loop guard dead-letters it if it keeps
 * doing this (retry.max_crashes).
 */
void watchdog_arm(struct watchdog *w, const struct store *s, int timeout_ms, const char *what);
void watchdog_disarm(struct watchdog *w);

#endif
