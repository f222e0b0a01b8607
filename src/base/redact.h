/* redact: the secrets this process knows (values read from ${file:} and secret kafka: properties), hidden wherever text leaves it. */
#ifndef DEDUPD_BASE_REDACT_H
#define DEDUPD_BASE_REDACT_H

#include <stddef.h>

/** The shortest value remembered: hiding every "ab" in every line would
 *  hide more than it protects. */
#define REDACT_MIN_LEN 4

/** The most remembered: a process has a handful; a fuzzer loading configs
 *  by the million must not grow the list (and every log line's scan) for
 *  ever. Past it, redact_add logs nothing and keeps nothing. */
#define REDACT_MAX 1024

/** What a secret is replaced with. */
#define REDACT_MARK "(secret)"

/** Remember secret (copied) for redact_text; thread-safe, idempotent,
 *  values shorter than REDACT_MIN_LEN are ignored. */
void redact_add(const char *secret);

/** 1 when s contains a remembered secret. */
int redact_contains(const char *s);

/** s with every remembered secret replaced by REDACT_MARK: malloc'd, or
 *  NULL when s holds none (the common case costs no copy). */
char *redact_text(const char *s);

/** Forget every secret (tests). */
void redact_clear(void);

#endif
