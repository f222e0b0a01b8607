/* mem: the one out-of-memory policy — an allocation that fails ends the process at once. */
#ifndef DEDUPD_BASE_MEM_H
#define DEDUPD_BASE_MEM_H

#include <stdarg.h>
#include <stddef.h>

/*
 * Nothing dedupd holds in memory is acknowledged before it is committed, so
 * dying is always safe: the transaction rolls back, the broker redelivers,
 * a supervisor restarts the process. Limping on with half a batch is not.
 * Every allocation goes through these; none returns NULL.
 */
void *xmalloc(size_t n) __attribute__((malloc, returns_nonnull));
void *xcalloc(size_t n, size_t size) __attribute__((malloc, returns_nonnull));
void *xrealloc(void *p, size_t n) __attribute__((returns_nonnull));
char *xstrdup(const char *s) __attribute__((malloc, returns_nonnull));
char *xstrndup(const char *s, size_t n) __attribute__((malloc, returns_nonnull));
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2), malloc, returns_nonnull));
char *xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0), malloc, returns_nonnull));

/** The out-of-memory line as a JSON object (the logger's json format). */
void mem_oom_json(int on);

#endif
