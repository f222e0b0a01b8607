/* destination: whether JetStream could ever take a record dedupd writes to the outbox — a subject one can publish to, headers nats.c carries apart. */
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

/* 1 when a is b's first bytes and shorter. */
static int proper_prefix(const char *a, const char *b)
{
        size_t n = strlen(a);
        return n < strlen(b) && !strncmp(a, b, n);
}

/* nats.c (3.4) finds a header by a name that merely begins another's, when
 * their hashes meet (for many pairs of lengths: "emit" and "emitted-by"):
 * the second is then sent as a value of the first. Two such names in one
 * record cannot go out as two headers; said instead of sent merged. The
 * record's key goes as NATS_RECORD_KEY_HEADER beside them. */
static int headers_apart(const struct record *rec, char *why, size_t whysz)
{
        for (size_t i = 0; i < rec->header_cnt + (rec->key != NULL); i++) {
                const char *a = i < rec->header_cnt ? rec->headers[i].name : NATS_RECORD_KEY_HEADER;
                for (size_t j = 0; j < rec->header_cnt; j++) {
                        const char *b = rec->headers[j].name;
                        if (!a || !b || (!proper_prefix(a, b) && !proper_prefix(b, a)))
                                continue;
                        snprintf(why, whysz,
                                 "headers '%s' and '%s': one name begins the other, and the NATS client library "
                                 "would send them as one header; rename one",
                                 a, b);
                        return -1;
                }
        }
        return 0;
}

/* Its subject. */
static int subject_ok(const struct record *rec, char *why, size_t whysz)
{
        const char *s = rec->topic ? rec->topic : "";
        size_t n = strlen(s);
        if (!n || n > NATS_SUBJECT_MAX || !utf8_text_ok(s, n)) {
                snprintf(why, whysz, "a NATS subject is UTF-8 text of 1 to %d bytes (this one: %zu)", NATS_SUBJECT_MAX,
                         n);
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

int nats_record_check(void *opaque, const struct record *rec, char *why, size_t whysz)
{
        (void)opaque;
        return subject_ok(rec, why, whysz) || headers_apart(rec, why, whysz) ? -1 : 0;
}
