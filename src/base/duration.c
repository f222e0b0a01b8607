/* duration: "30s", "48h", "7d" read and written — how the config spells a length of time. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"

int64_t config_parse_duration(const char *s)
{
        static const struct {
                const char *unit;
                int64_t ms;
        } units[] = {
                {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}, {"w", 604800000},
        };
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno || v < 0)
                return -1;
        while (*end == ' ')
                end++;
        if (!*end)
                return v; /* plain milliseconds */
        for (size_t i = 0; i < sizeof(units) / sizeof(*units); i++)
                if (!strcmp(end, units[i].unit)) {
                        if (v > INT64_MAX / units[i].ms)
                                return -1;
                        return v * units[i].ms;
                }
        return -1;
}

const char *config_format_duration(int64_t ms, char *buf, size_t bufsz)
{
        static const struct {
                const char *unit;
                int64_t ms;
        } units[] = {
                {"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1},
        };
        size_t off = 0;
        buf[0] = '\0';
        if (ms == 0) {
                snprintf(buf, bufsz, "0s");
                return buf;
        }
        for (size_t i = 0; i < sizeof(units) / sizeof(*units) && ms > 0; i++) {
                if (ms < units[i].ms)
                        continue;
                off += (size_t)snprintf(buf + off, bufsz > off ? bufsz - off : 0, "%s%lld%s", off ? " " : "",
                                        (long long)(ms / units[i].ms), units[i].unit);
                ms %= units[i].ms;
        }
        return buf;
}
