/* replay: what dedupctl replay reads off its command line — times, offsets, partitions. */
#include "tools/replay.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

int replay_parse_offset(const char *s, int64_t *out, char *err, size_t errsz)
{
        char *end;
        long long v;
        /* Digits only: strtoll would also take " 5" and "+5", and saturate
         * 99999999999999999999 to INT64_MAX — a different offset than written. */
        if (!*s || strspn(s, "0123456789") != strlen(s)) {
                snprintf(err, errsz, "'%s': expected an offset (a number >= 0)", s);
                return -1;
        }
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno == ERANGE) {
                snprintf(err, errsz, "'%s': an offset is at most %lld", s, (long long)INT64_MAX);
                return -1;
        }
        *out = v;
        return 0;
}

int replay_parse_partitions(const char *s, int32_t **out, size_t *cnt, char *err, size_t errsz)
{
        size_t n = 1;
        int32_t *v;
        const char *p = s;

        for (const char *q = s; *q; q++)
                n += *q == ',';
        v = xcalloc(n, sizeof(*v));
        for (size_t i = 0; i < n; i++) {
                char *end;
                long x;
                if (!isdigit((unsigned char)*p))
                        goto bad;
                x = strtol(p, &end, 10);
                if (x > INT32_MAX || (*end && *end != ','))
                        goto bad;
                for (size_t k = 0; k < i; k++)
                        if (v[k] == (int32_t)x) {
                                snprintf(err, errsz, "partition %ld is listed twice in '%s'", x, s);
                                free(v);
                                return -1;
                        }
                v[i] = (int32_t)x;
                p = *end ? end + 1 : end;
        }
        *out = v;
        *cnt = n;
        return 0;
bad:
        snprintf(err, errsz, "bad partition list '%s': expected numbers like 0,2", s);
        free(v);
        return -1;
}
