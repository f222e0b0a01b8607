/* strbuf: a string that grows as text is added, always NUL-terminated. */
#ifndef DEDUPD_BASE_STRBUF_H
#define DEDUPD_BASE_STRBUF_H

#include <stddef.h>
#include <string.h>

/** Start as {0}; p is NULL until the first add. The caller frees p. */
struct strbuf {
        char *p;
        size_t len, cap;
};

/** Append n bytes of data (out of memory ends the process, as mem.h does). */
void strbuf_add(struct strbuf *b, const void *data, size_t n);

/** Append a NUL-terminated string. */
static inline void strbuf_adds(struct strbuf *b, const char *s) { strbuf_add(b, s, strlen(s)); }

#endif
