/* log: the one logger — levels, printf-checked, context prefixes, two line formats, rate limiting. */
#ifndef DEDUPD_LOG_H
#define DEDUPD_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_ERROR = 3, LOG_WARN = 4, LOG_INFO = 6, LOG_DEBUG = 7 };

/** human: "2026-12-01T09:00:00.123Z 123 WARN  [ctx] msg"; json: one object a line. */
enum log_format { LOG_FORMAT_HUMAN = 0, LOG_FORMAT_JSON = 1 };

/** The longest message written whole. A longer one (a runaway dump, not a
 *  line anyone reads) is cut at a character boundary, and the line says so
 *  and how much was cut. */
#define LOG_MSG_MAX (1024 * 1024)

extern int log_level_current;

void log_set_level(int level);
/** Parse "error|warn|info|debug"; -1 when unknown. */
int log_level_parse(const char *s);

void log_set_format(enum log_format format);
/** Parse "human|json"; -1 when unknown. */
int log_format_parse(const char *s);

/** Where lines go (default 2, stderr); for tests. */
void log_set_fd(int fd);

void log_write(int level, const char *ctx, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void log_vwrite(int level, const char *ctx, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

/** Checks the level before formatting anything (Redis' serverLog idea). */
#define LOG(level, ctx, ...)                                                                                           \
        do {                                                                                                           \
                if ((level) <= log_level_current)                                                                      \
                        log_write((level), (ctx), __VA_ARGS__);                                                        \
        } while (0)
#define log_error(ctx, ...) LOG(LOG_ERROR, ctx, __VA_ARGS__)
#define log_warn(ctx, ...) LOG(LOG_WARN, ctx, __VA_ARGS__)
#define log_info(ctx, ...) LOG(LOG_INFO, ctx, __VA_ARGS__)
#define log_debug(ctx, ...) LOG(LOG_DEBUG, ctx, __VA_ARGS__)

/** One line as it is written, from its parts. */
struct log_record {
        int64_t ts_ms; /* wall clock, milliseconds since the epoch */
        int pid;
        int level;
        const char *ctx; /* NULL: none */
        const char *msg;
};
/** The line for rec in format, '\n'-terminated, malloc'd; *len its length.
 *  JSON lines carry ts, level, pid, ctx (when set) and msg; bytes that are
 *  not UTF-8 become U+FFFD, control characters are escaped. */
char *log_line_format(enum log_format format, const struct log_record *rec, size_t *len);

/**
 * A rate limiter for one repeated message (connection refused every 100 ms).
 * Zero-initialised; what it holds is freed by log_ratelimit_flush.
 */
struct log_ratelimit {
        int64_t window_start_ms;
        int in_window;
        int suppressed;
        int last_level;
        char *last_ctx, *last_msg; /* the latest suppressed line, quoted when the count is reported */
};
/** Log like log_write, at most `burst` lines per `interval_ms` through rl.
 *  The lines held back are counted; the next line that goes out is preceded
 *  by one naming how many were held back, over how long, and the last of
 *  them in full. */
void log_limited(struct log_ratelimit *rl, int burst, int interval_ms, int level, const char *ctx, const char *fmt, ...)
        __attribute__((format(printf, 6, 7)));
/** Report what rl still holds back, then free it (rl can be used again). */
void log_ratelimit_flush(struct log_ratelimit *rl);

int64_t log_now_ms(void);

#endif
