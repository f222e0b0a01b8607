/* fuzz: what every libFuzzer target shares — splitting the input into fields, and a loud property failure. */
#ifndef DEDUPD_FUZZ_H
#define DEDUPD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Fields of an input are separated by NUL bytes (product strings are C
 * strings, so a NUL could never be inside one anyway). Each field comes
 * out as its own malloc'd, NUL-terminated copy; missing fields are NULL. */
struct fuzz_fields {
        char *f[8];
        size_t len[8];
        size_t cnt;
};

static inline void fuzz_split(const uint8_t *data, size_t size, size_t max, struct fuzz_fields *out)
{
        size_t start = 0;
        memset(out, 0, sizeof(*out));
        if (max > 8)
                max = 8;
        for (size_t i = 0; i <= size && out->cnt < max; i++) {
                if (i < size && (data[i] != 0 || out->cnt == max - 1))
                        continue;
                out->len[out->cnt] = i - start;
                out->f[out->cnt] = malloc(i - start + 1);
                memcpy(out->f[out->cnt], data + start, i - start);
                out->f[out->cnt][i - start] = '\0';
                out->cnt++;
                start = i + 1;
        }
}

static inline void fuzz_fields_free(struct fuzz_fields *ff)
{
        for (size_t i = 0; i < ff->cnt; i++)
                free(ff->f[i]);
}

/* A property dedupd promises does not hold: say which and stop, so
 * libFuzzer writes the input out as a crash reproducer. */
#define FUZZ_ASSERT(cond, ...)                                                                                         \
        do {                                                                                                           \
                if (!(cond)) {                                                                                         \
                        fprintf(stderr, "fuzz property failed: %s\n  ", #cond);                                        \
                        fprintf(stderr, __VA_ARGS__);                                                                  \
                        fputc('\n', stderr);                                                                           \
                        abort();                                                                                       \
                }                                                                                                      \
        } while (0)

#endif
