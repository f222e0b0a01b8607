/* conninfo: a libpq connection string as keywords and values, with dedupd's connect_timeout and name filled in. */
#include "pg/conninfo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/redact.h"

/* libpq reads connect_timeout as an integer; zero or less (or none) is
 * "wait for ever". */
static int timeout_of(const char *v) { return v && *v ? atoi(v) : 0; }

static int effective_timeout(const char *own, int default_s, int64_t cap_ms)
{
        const char *env = getenv("PGCONNECT_TIMEOUT");
        int t = own ? timeout_of(own) : env && *env ? timeout_of(env) : default_s;
        if (cap_ms > 0) {
                int cap = (int)((cap_ms + 999) / 1000);
                if (t <= 0 || t > cap)
                        t = cap;
        }
        return t;
}

/* libpq quotes the part of the conninfo it stumbled on ('missing "=" after
 * "b" in connection info string', or a whole URI), which may be a piece of
 * the password: every quoted part but a lone punctuation mark is hidden. */
static void redact(const char *msg, char *out, size_t outsz)
{
        size_t w = 0;
        for (const char *r = msg; *r && w + 8 < outsz;) {
                const char *end = *r == '"' ? strchr(r + 1, '"') : NULL;
                if (!end || end - r == 2) {
                        size_t n = end ? 3 : 1;
                        memcpy(out + w, r, n);
                        w += n;
                        r += n;
                        continue;
                }
                memcpy(out + w, "\"...\"", 5);
                w += 5;
                r = end + 1;
        }
        out[w] = '\0';
}

int conninfo_params_init(struct conninfo_params *p, const char *conninfo, int default_s, int64_t cap_ms, char *err,
                         size_t errsz)
{
        char *perr = NULL;
        const char *own = NULL;
        int named = 0;
        size_t n = 0, k = 0;

        memset(p, 0, sizeof(*p));
        if (!(p->opts = PQconninfoParse(conninfo, &perr))) {
                if (perr)
                        redact(perr, err, errsz);
                else
                        snprintf(err, errsz, "invalid connection string (out of memory?)");
                PQfreemem(perr);
                return -1;
        }
        for (PQconninfoOption *o = p->opts; o->keyword; o++) {
                n += o->val != NULL;
                if (o->val && !strcmp(o->keyword, "connect_timeout"))
                        own = o->val;
                named |= o->val && !strcmp(o->keyword, "fallback_application_name");
                if (o->val && (!strcmp(o->keyword, "password") || !strcmp(o->keyword, "sslpassword")))
                        redact_add(o->val); /* written in the conninfo itself: still never logged */
        }
        p->keys = xcalloc(n + 3, sizeof(*p->keys));
        p->values = xcalloc(n + 3, sizeof(*p->values));
        for (PQconninfoOption *o = p->opts; o->keyword; o++) {
                if (!o->val || !strcmp(o->keyword, "connect_timeout"))
                        continue;
                p->keys[k] = o->keyword;
                p->values[k++] = o->val;
        }
        int t = effective_timeout(own, default_s, cap_ms);
        if (t > 0 || own) {
                snprintf(p->timeout, sizeof(p->timeout), "%d", t);
                p->keys[k] = "connect_timeout";
                p->values[k++] = p->timeout;
        }
        /* dedupd's name in pg_stat_activity, unless the conninfo (or
         * PGAPPNAME) gives one: sent at connect, so a pooler keeps it for
         * this client whichever server session a transaction runs in. */
        if (!named) {
                p->keys[k] = "fallback_application_name";
                p->values[k++] = "dedupd";
        }
        return 0;
}

void conninfo_params_free(struct conninfo_params *p)
{
        PQconninfoFree(p->opts);
        free(p->keys);
        free(p->values);
        memset(p, 0, sizeof(*p));
}

int conninfo_timeout_s(const struct conninfo_params *p) { return p->timeout[0] ? atoi(p->timeout) : 0; }
