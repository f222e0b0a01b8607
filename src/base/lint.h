/* lint: key-design lint — the seed's anti-patterns found in a key template before a message is read. */
#ifndef DEDUPD_LINT_H
#define DEDUPD_LINT_H

#include <stddef.h>

#include "base/config.h"

enum lint_severity { LINT_WARN = 1, LINT_ERROR = 2 };

struct lint_finding {
        enum lint_severity severity;
        char message[512];
};

/**
 * Lint the key templates of one topic (action and request may be NULL).
 * Errors: a source the consumer or Kafka makes up ({offset}, {uuid}, ...).
 * Warnings: no action; a subject or request that looks like a timestamp (too
 * fine); a subject that is a bare user id without a request (too coarse); a
 * key that reads nothing from the message. Stores up to max findings in out
 * and returns how many it stored.
 */
int lint_key(const char *subject, const char *action, const char *request, struct lint_finding *out, size_t max);

/** Called once per finding of lint_config(). */
typedef void(lint_report_cb)(void *opaque, const struct topic_conf *t, const struct lint_finding *f);

/** Lint every topic's key: each finding to report (NULL: logged, at WARN or
 *  ERROR, as file:line:column). Returns the number of errors. */
int lint_config(const struct config *cfg, lint_report_cb *report, void *opaque);

#endif
