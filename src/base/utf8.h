/* utf8: what may be stored as PostgreSQL text — well-formed UTF-8 without NUL — checked with libunistring. */
#ifndef DEDUPD_BASE_UTF8_H
#define DEDUPD_BASE_UTF8_H

#include <stddef.h>

/** 1 when s[0..n) is well-formed UTF-8 (RFC 3629: no overlong forms, no
 *  surrogates, nothing above U+10FFFF) holding no NUL: what a text column
 *  accepts. */
int utf8_text_ok(const void *s, size_t n);

/** Length of the well-formed UTF-8 character at s (left bytes readable),
 *  0 when there is none. */
size_t utf8_char_len(const void *s, size_t left);

#endif
