/* interpolate: ${NAME} and ${NAME:-default} in config values, from the environment (secrets stay out of the file). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"

#include "base/mem.h"

char *config_interpolate(const char *s, char *err, size_t errsz)
{
        size_t cap = strlen(s) + 64, len = 0;
        char *out = xmalloc(cap);

        while (*s) {
                const char *piece = s;
                size_t n = 1;
                char *name = NULL;
                if (s[0] == '$' && s[1] == '{') {
                        const char *end = strchr(s + 2, '}');
                        if (!end) {
                                snprintf(err, errsz, "unterminated ${ in value");
                                free(out);
                                return NULL;
                        }
                        name = xstrndup(s + 2, (size_t)(end - s - 2));
                        char *dflt = strstr(name, ":-");
                        if (dflt) {
                                *dflt = '\0';
                                dflt += 2;
                        }
                        if (!*name) {
                                snprintf(err, errsz, "empty variable name in ${}");
                                free(name);
                                free(out);
                                return NULL;
                        }
                        const char *val = getenv(name);
                        if (!val || (!*val && dflt))
                                val = dflt;
                        if (!val) {
                                snprintf(err, errsz,
                                         "environment variable %s is not set (use ${%s:-default} "
                                         "for an optional value)",
                                         name, name);
                                free(name);
                                free(out);
                                return NULL;
                        }
                        piece = val;
                        n = strlen(val);
                        s = end + 1;
                } else {
                        s++;
                }
                if (len + n + 1 > cap) {
                        cap = (len + n + 1) * 2;
                        out = xrealloc(out, cap);
                }
                memcpy(out + len, piece, n);
                len += n;
                free(name);
        }
        out[len] = '\0';
        return out;
}
