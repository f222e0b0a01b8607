/* redact: the secrets this process knows (values read from ${file:} and secret kafka: properties), hidden wherever text leaves it. */
#include "base/redact.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

/* Written at config load and reload, read by every log line from any
 * thread (librdkafka's included): one mutex, the list only grows. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char **secrets;
static size_t cnt;

void redact_add(const char *secret)
{
        if (!secret || strlen(secret) < REDACT_MIN_LEN)
                return;
        pthread_mutex_lock(&mu);
        if (cnt >= REDACT_MAX)
                goto out;
        for (size_t i = 0; i < cnt; i++)
                if (!strcmp(secrets[i], secret))
                        goto out;
        secrets = xrealloc(secrets, (cnt + 1) * sizeof(*secrets));
        secrets[cnt++] = xstrdup(secret);
out:
        pthread_mutex_unlock(&mu);
}

/* The earliest secret in s at or after p: its start, and its length in *len. */
static const char *first_secret(const char *p, size_t *len)
{
        const char *best = NULL;
        for (size_t i = 0; i < cnt; i++) {
                const char *hit = strstr(p, secrets[i]);
                size_t n = strlen(secrets[i]);
                if (hit && (!best || hit < best || (hit == best && n > *len))) {
                        best = hit;
                        *len = n;
                }
        }
        return best;
}

int redact_contains(const char *s)
{
        size_t len = 0;
        pthread_mutex_lock(&mu);
        int found = s && cnt && first_secret(s, &len) != NULL;
        pthread_mutex_unlock(&mu);
        return found;
}

char *redact_text(const char *s)
{
        char *out = NULL;
        size_t w = 0, cap = 0, len = 0;
        const char *p = s, *hit;

        pthread_mutex_lock(&mu);
        if (!s || !cnt || !(hit = first_secret(s, &len)))
                goto done;
        cap = strlen(s) + sizeof(REDACT_MARK) * 4 + 1;
        out = xmalloc(cap);
        do {
                size_t keep = (size_t)(hit - p);
                if (w + keep + sizeof(REDACT_MARK) + 1 > cap) {
                        cap = (w + keep + sizeof(REDACT_MARK) + 1) * 2;
                        out = xrealloc(out, cap);
                }
                memcpy(out + w, p, keep);
                w += keep;
                memcpy(out + w, REDACT_MARK, sizeof(REDACT_MARK) - 1);
                w += sizeof(REDACT_MARK) - 1;
                p = hit + len;
                len = 0;
        } while ((hit = first_secret(p, &len)));
        size_t rest = strlen(p);
        if (w + rest + 1 > cap)
                out = xrealloc(out, w + rest + 1);
        memcpy(out + w, p, rest + 1);
done:
        pthread_mutex_unlock(&mu);
        return out;
}

void redact_clear(void)
{
        pthread_mutex_lock(&mu);
        for (size_t i = 0; i < cnt; i++)
                free(secrets[i]);
        free(secrets);
        secrets = NULL;
        cnt = 0;
        pthread_mutex_unlock(&mu);
}
