/* log: the one logger — levels, printf-checked, context prefixes, two line formats, rate limiting. */
#include "base/log.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/mem.h"
#include "base/redact.h"

int log_level_current = LOG_INFO;
static enum log_format format_current = LOG_FORMAT_HUMAN;
static int out_fd = 2;

void log_set_level(int level) { log_level_current = level; }

int log_level_parse(const char *s)
{
        static const struct {
                const char *name;
                int level;
        } levels[] = {
                {"error", LOG_ERROR}, {"warn", LOG_WARN},   {"warning", LOG_WARN},
                {"info", LOG_INFO},   {"debug", LOG_DEBUG},
        };
        for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
                if (!strcasecmp(s, levels[i].name))
                        return levels[i].level;
        return -1;
}

void log_set_format(enum log_format format)
{
        format_current = format;
        /* The out-of-memory line is written without allocating, by mem.c. */
        mem_oom_json(format == LOG_FORMAT_JSON);
}

int log_format_parse(const char *s)
{
        if (!strcasecmp(s, "human"))
                return LOG_FORMAT_HUMAN;
        if (!strcasecmp(s, "json"))
                return LOG_FORMAT_JSON;
        return -1;
}

void log_set_fd(int fd) { out_fd = fd; }

int64_t log_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The message, whole up to LOG_MSG_MAX bytes (two passes: measure, then
 * format), cut at a character boundary beyond that with a note saying so. */
static char *format_msg(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
static char *format_msg(const char *fmt, va_list ap)
{
        va_list aq;
        va_copy(aq, ap);
        int n = vsnprintf(NULL, 0, fmt, aq);
        va_end(aq);
        if (n < 0)
                return xasprintf("(a log message could not be formatted: %s; format \"%s\")", strerror(errno), fmt);
        size_t keep = (size_t)n <= LOG_MSG_MAX ? (size_t)n : LOG_MSG_MAX;
        char *m = xmalloc(keep + 200);
        /* 4 bytes past the cut, to find the character the cut falls in. */
        vsnprintf(m, keep < (size_t)n ? keep + 5 : keep + 1, fmt, ap);
        if (keep < (size_t)n) {
                while (keep > 0 && ((unsigned char)m[keep] & 0xC0) == 0x80)
                        keep--;
                snprintf(m + keep, 200, " ... [cut: %zu more bytes; a log message is written whole up to %d bytes]",
                         (size_t)n - keep, LOG_MSG_MAX);
        }
        return m;
}

/* One write per line, so that concurrent writers (librdkafka's threads, the
 * watchdog, other processes on the same pipe) do not interleave within it. */
static void write_all(const char *p, size_t len)
{
        while (len > 0) {
                ssize_t w = write(out_fd, p, len);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return; /* nowhere to say it */
                p += w;
                len -= (size_t)w;
        }
}

static int64_t wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void emit(int level, const char *ctx, const char *msg)
{
        char *hidden = redact_text(msg); /* a secret that reached a message never reaches the line */
        struct log_record rec = {wall_ms(), (int)getpid(), level, ctx, hidden ? hidden : msg};
        size_t len;
        char *line = log_line_format(format_current, &rec, &len);
        write_all(line, len);
        free(line);
        free(hidden);
}

void log_vwrite(int level, const char *ctx, const char *fmt, va_list ap)
{
        if (level > log_level_current)
                return;
        char *msg = format_msg(fmt, ap);
        emit(level, ctx, msg);
        free(msg);
}

void log_write(int level, const char *ctx, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        log_vwrite(level, ctx, fmt, ap);
        va_end(ap);
}

/* ---- rate limiting ---------------------------------------------------------- */

/* Partition workers share some limiters (a statement's, a ledger's): one
 * lock for all of them, taken only on these rare paths. */
static pthread_mutex_t rl_lock = PTHREAD_MUTEX_INITIALIZER;

static void report_suppressed(struct log_ratelimit *rl, int64_t now)
{
        if (!rl->suppressed)
                return;
        char *msg =
                xasprintf("(%d similar message%s suppressed over %.1f s; the last: %s)", rl->suppressed,
                          rl->suppressed == 1 ? "" : "s", (double)(now - rl->window_start_ms) / 1000.0, rl->last_msg);
        emit(rl->last_level, rl->last_ctx, msg);
        free(msg);
        rl->suppressed = 0;
}

static void forget_last(struct log_ratelimit *rl)
{
        free(rl->last_ctx);
        free(rl->last_msg);
        rl->last_ctx = rl->last_msg = NULL;
}

void log_limited(struct log_ratelimit *rl, int burst, int interval_ms, int level, const char *ctx, const char *fmt, ...)
{
        int64_t now = log_now_ms();
        va_list ap;
        char *msg;

        if (level > log_level_current)
                return;
        pthread_mutex_lock(&rl_lock);
        if (!rl->window_start_ms || now - rl->window_start_ms >= interval_ms) {
                report_suppressed(rl, now);
                forget_last(rl);
                rl->window_start_ms = now;
                rl->in_window = 0;
        }
        va_start(ap, fmt);
        msg = format_msg(fmt, ap);
        va_end(ap);
        if (rl->in_window < burst) {
                rl->in_window++;
                emit(level, ctx, msg);
                free(msg);
                pthread_mutex_unlock(&rl_lock);
                return;
        }
        rl->suppressed++;
        forget_last(rl);
        rl->last_level = level;
        rl->last_ctx = ctx ? xstrdup(ctx) : NULL;
        rl->last_msg = msg;
        pthread_mutex_unlock(&rl_lock);
}

void log_ratelimit_flush(struct log_ratelimit *rl)
{
        pthread_mutex_lock(&rl_lock);
        report_suppressed(rl, log_now_ms());
        forget_last(rl);
        pthread_mutex_unlock(&rl_lock);
}
