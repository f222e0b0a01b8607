/* hex: bytes as lowercase hexadecimal, as PostgreSQL's encode(…, 'hex') writes them. */
#ifndef DEDUPD_BASE_HEX_H
#define DEDUPD_BASE_HEX_H

#include <stddef.h>

/** in[0..n) into out[0..2n], NUL-terminated. */
static inline void hex_encode(const unsigned char *in, size_t n, char *out)
{
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[in[i] >> 4];
                out[2 * i + 1] = digits[in[i] & 15];
        }
        out[2 * n] = '\0';
}

#endif
