/* utf8: what may be stored as PostgreSQL text — well-formed UTF-8 without NUL — checked with libunistring. */
#include "base/utf8.h"

#include <string.h>

#include <unistr.h>

int utf8_text_ok(const void *s, size_t n)
{
        if (!n)
                return 1;
        return !memchr(s, '\0', n) && u8_check(s, n) == NULL;
}

size_t utf8_char_len(const void *s, size_t left)
{
        int n = left ? u8_mblen(s, left) : -1;
        return n > 0 ? (size_t)n : 0;
}
