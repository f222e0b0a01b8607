/* log: the one logger — levels, printf-checked, context prefixes, rate limiting. */
#ifndef DEDUPD_LOG_H
#define DEDUPD_LOG_H

#include <stdarg.h>
#include <stdint.h>

enum log_level { LOG_ERROR = 3, LOG_WARN = 4, LOG_INFO = 6, LOG_DEBUG = 7 };

extern int log_level_current;

void log_set_level(int level);
/** Parse "error|warn|info|debug"; -1 when unknown. */
int log_level_parse(const char *s);

void log_write(int level, const char *ctx, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
void log_vwrite(int level, const char *ctx, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));

/** Checks the level before formatting anything (Redis' serverLog idea). */
#define LOG(level, ctx, ...)                                                   \
        do {                                                                   \
                if ((level) <= log_level_current)                              \
                        log_write((level), (ctx), __VA_ARGS__);                \
        } while (0)
#define log_error(ctx, ...) LOG(LOG_ERROR, ctx, __VA_ARGS__)
#define log_warn(ctx, ...)  LOG(LOG_WARN, ctx, __VA_ARGS__)
#define log_info(ctx, ...)  LOG(LOG_INFO, ctx, __VA_ARGS__)
#define log_debug(ctx, ...) LOG(LOG_DEBUG, ctx, __VA_ARGS__)

/** A rate limiter for repeated errors (connection refused every 100 ms). */
struct log_ratelimit {
        int64_t window_start_ms;
        int in_window;
        int suppressed;
};
/** Returns 1 when this occurrence may be logged (at most `burst` per
 *  `interval_ms`); suppressed ones are counted and reported on the next
 *  allowed line. */
int log_ratelimit_ok(struct log_ratelimit *rl, int burst, int interval_ms);

int64_t log_now_ms(void);

#endif
