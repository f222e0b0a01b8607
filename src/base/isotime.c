/* isotime: a point in time as an operator writes it — ISO-8601 with a zone, or epoch milliseconds. */
#include "base/isotime.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int take_digits(const char **p, int n, int *out)
{
        int v = 0;
        for (int i = 0; i < n; i++) {
                if (!isdigit((unsigned char)(*p)[i]))
                        return -1;
                v = v * 10 + ((*p)[i] - '0');
        }
        *p += n;
        *out = v;
        return 0;
}

int isotime_parse(const char *s, int64_t *ms, char *err, size_t errsz)
{
        const char *p = s;
        int y, mo, d, h, mi, sec = 0, frac_ms = 0, zone_min = 0;
        size_t len = strlen(s);

        if (len && strspn(s, "0123456789") == len) {
                /* 12 digits: 1973 in milliseconds. Fewer are surely seconds, which
                 * would quietly mean January 1970. */
                if (len < 12 || len > 15) {
                        snprintf(err, errsz, "'%s' is not epoch milliseconds%s", s,
                                 len == 10 ? " (it looks like seconds: append 000)" : "");
                        return -1;
                }
                *ms = strtoll(s, NULL, 10);
                return 0;
        }
        if (take_digits(&p, 4, &y) || *p++ != '-' || take_digits(&p, 2, &mo) || *p++ != '-' || take_digits(&p, 2, &d) ||
            (*p != 'T' && *p != 't' && *p != ' '))
                goto bad;
        p++;
        if (take_digits(&p, 2, &h) || *p++ != ':' || take_digits(&p, 2, &mi))
                goto bad;
        if (*p == ':') {
                p++;
                if (take_digits(&p, 2, &sec))
                        goto bad;
                if (*p == '.' || *p == ',') {
                        int digits = 0, scale = 100;
                        for (p++; isdigit((unsigned char)*p); p++, digits++) {
                                frac_ms += (*p - '0') * scale;
                                scale /= 10;
                        }
                        if (!digits)
                                goto bad;
                }
        }
        if (*p == 'Z' || *p == 'z') {
                p++;
        } else if (*p == '+' || *p == '-') {
                int sign = *p++ == '-' ? -1 : 1, zh, zm = 0;
                if (take_digits(&p, 2, &zh))
                        goto bad;
                if (*p == ':')
                        p++;
                if (*p && take_digits(&p, 2, &zm))
                        goto bad;
                if (zh > 23 || zm > 59)
                        goto bad;
                zone_min = sign * (zh * 60 + zm);
        } else if (!*p) {
                snprintf(err, errsz, "'%s' has no time zone: add Z for UTC or an offset like +01:00", s);
                return -1;
        } else {
                goto bad;
        }
        if (*p || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
                goto bad;
        struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi, .tm_sec = sec};
        time_t t = timegm(&tm);
        if (tm.tm_mday != d || tm.tm_mon != mo - 1) /* timegm normalised 2026-02-30 */
                goto bad;
        *ms = ((int64_t)t - (int64_t)zone_min * 60) * 1000 + frac_ms;
        return 0;
bad:
        snprintf(err, errsz,
                 "bad time '%s': expected ISO-8601 like 2026-11-29T20:00:00Z or epoch "
                 "milliseconds",
                 s);
        return -1;
}
