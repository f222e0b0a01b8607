/* destination: whether JetStream could ever take a record dedupd writes to the outbox — a subject one can publish to. */
#include "source/nats/destination.h"

#include <stdio.h>
#include <string.h>

#include "base/utf8.h"

/* The token [t, t + n) of a subject, as a publisher may name it. */
static int token_ok(const char *t, size_t n, char *why, size_t whysz)
{
        if (!n) {
                snprintf(why, whysz, "a NATS subject has no empty token (a leading, trailing or doubled '.')");
                return -1;
        }
        if (n == 1 && (*t == '*' || *t == '>')) {
                snprintf(why, whysz, "a NATS subject one publishes to has no wildcard token ('%c')", *t);
                return -1;
        }
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)t[i] <= ' ' || t[i] == 0x7f) {
                        snprintf(why, whysz, "a NATS subject has no white space or control character");
                        return -1;
                }
        return 0;
}

int nats_record_check(void *opaque, const struct record *rec, char *why, size_t whysz)
{
        const char *s = rec->topic ? rec->topic : "";
        size_t n = strlen(s);
        (void)opaque;
        if (!n || n > NATS_SUBJECT_MAX || !utf8_text_ok(s, n)) {
                snprintf(why, whysz, "a NATS subject is UTF-8 text of 1 to %d bytes (this one: %zu)", NATS_SUBJECT_MAX, n);
                return -1;
        }
        if (*s == '$') {
                snprintf(why, whysz, "'%s' is the server's own API ($JS, $SYS, $KV, ...: a subject beginning with $)",
                         s);
                return -1;
        }
        for (const char *t = s;; t++) {
                const char *dot = strchr(t, '.');
                size_t len = dot ? (size_t)(dot - t) : strlen(t);
                if (token_ok(t, len, why, whysz))
                        return -1;
                if (!dot)
                        return 0;
                t = dot;
        }
}
