/* log: the one logger — levels, printf-checked, context prefixes, rate limiting. */
#include "base/log.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

int log_level_current = LOG_INFO;

void log_set_level(int level) { log_level_current = level; }

int log_level_parse(const char *s)
{
        static const struct { const char *name; int level; } levels[] = {
                {"error", LOG_ERROR}, {"warn", LOG_WARN}, {"warning", LOG_WARN},
                {"info", LOG_INFO}, {"debug", LOG_DEBUG},
        };
        for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
                if (!strcasecmp(s, levels[i].name))
                        return levels[i].level;
        return -1;
}

int64_t log_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *level_name(int level)
{
        switch (level) {
        case LOG_ERROR: return "ERROR";
        case LOG_WARN: return "WARN";
        case LOG_INFO: return "INFO";
        default: return "DEBUG";
        }
}

void log_vwrite(int level, const char *ctx, const char *fmt, va_list ap)
{
        char line[4096];
        struct timespec ts;
        struct tm tm;
        size_t off;

        if (level > log_level_current)
                return;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        off = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
        off += (size_t)snprintf(line + off, sizeof(line) - off, ".%03ldZ %d %-5s %s%s%s",
                                ts.tv_nsec / 1000000, (int)getpid(), level_name(level),
                                ctx ? "[" : "", ctx ? ctx : "", ctx ? "] " : "");
        if (off < sizeof(line))
                vsnprintf(line + off, sizeof(line) - off, fmt, ap);
        /* One write per line so concurrent processes do not interleave. */
        fprintf(stderr, "%s\n", line);
}

void log_write(int level, const char *ctx, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        log_vwrite(level, ctx, fmt, ap);
        va_end(ap);
}

int log_ratelimit_ok(struct log_ratelimit *rl, int burst, int interval_ms)
{
        int64_t now = log_now_ms();
        if (now - rl->window_start_ms >= interval_ms) {
                if (rl->suppressed)
                        log_write(LOG_WARN, NULL, "(%d similar messages suppressed)",
                                  rl->suppressed);
                rl->window_start_ms = now;
                rl->in_window = 0;
                rl->suppressed = 0;
        }
        if (rl->in_window < burst) {
                rl->in_window++;
                return 1;
        }
        rl->suppressed++;
        return 0;
}
