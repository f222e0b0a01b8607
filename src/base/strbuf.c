/* strbuf: a string that grows as text is added, always NUL-terminated. */
#include "base/strbuf.h"

#include "base/mem.h"

void strbuf_add(struct strbuf *b, const void *data, size_t n)
{
        if (b->len + n + 1 > b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 128;
                while (cap < b->len + n + 1)
                        cap *= 2;
                b->p = xrealloc(b->p, cap);
                b->cap = cap;
        }
        if (n)
                memcpy(b->p + b->len, data, n);
        b->len += n;
        b->p[b->len] = '\0';
}
