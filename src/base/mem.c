/* mem: the one out-of-memory policy — an allocation that fails ends the process at once. */
#include "base/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int oom_json;

void mem_oom_json(int on) { oom_json = on; }

/* Nothing here allocates: not the time, not the line. */
static int oom_line(char *msg, size_t sz, size_t n)
{
        struct timespec ts;
        struct tm tm;
        char when[32];
        if (!oom_json)
                return snprintf(msg, sz, "dedupd: out of memory (%zu bytes): ending the process\n", n);
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        return snprintf(msg, sz,
                        "{\"ts\":\"%s.%03dZ\",\"level\":\"error\",\"pid\":%d,\"ctx\":\"mem\","
                        "\"msg\":\"out of memory (%zu bytes): ending the process\"}\n",
                        when, (int)(ts.tv_nsec / 1000000), (int)getpid(), n);
}

static void out_of_memory(size_t n)
{
        char msg[256];
        int len = oom_line(msg, sizeof(msg), n);
        if (len > 0 && write(2, msg, (size_t)len) < 0) { /* stderr without allocating */
        }
        abort();
}

void *xmalloc(size_t n)
{
        void *p = malloc(n ? n : 1);
        if (!p)
                out_of_memory(n);
        return p;
}

void *xcalloc(size_t n, size_t size)
{
        void *p = calloc(n ? n : 1, size ? size : 1);
        if (!p)
                out_of_memory(n * size);
        return p;
}

void *xrealloc(void *p, size_t n)
{
        void *q = realloc(p, n ? n : 1);
        if (!q)
                out_of_memory(n);
        return q;
}

char *xstrdup(const char *s)
{
        char *p = strdup(s);
        if (!p)
                out_of_memory(strlen(s) + 1);
        return p;
}

char *xstrndup(const char *s, size_t n)
{
        char *p = strndup(s, n);
        if (!p)
                out_of_memory(n + 1);
        return p;
}

char *xvasprintf(const char *fmt, va_list ap)
{
        char *s = NULL;
        if (vasprintf(&s, fmt, ap) < 0)
                out_of_memory(strlen(fmt));
        return s;
}

char *xasprintf(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *s = xvasprintf(fmt, ap);
        va_end(ap);
        return s;
}
