/* log_line: one log line from its parts — the human layout, or a JSON object built with jansson. */
#include "base/log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "base/mem.h"
#include "base/utf8.h"

static const char *level_name(int level, int lower)
{
        switch (level) {
        case LOG_ERROR: return lower ? "error" : "ERROR";
        case LOG_WARN: return lower ? "warn" : "WARN";
        case LOG_INFO: return lower ? "info" : "INFO";
        default: return lower ? "debug" : "DEBUG";
        }
}

/* "2026-12-01T09:00:00.123Z" */
static void format_ts(int64_t ts_ms, char *buf, size_t sz)
{
        time_t secs = (time_t)(ts_ms / 1000);
        struct tm tm;
        gmtime_r(&secs, &tm);
        size_t off = strftime(buf, sz, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + off, sz - off, ".%03dZ", (int)(ts_ms % 1000));
}

/* A JSON string must be UTF-8; a message may quote bytes that are not (a
 * payload, a key): each such byte becomes U+FFFD rather than losing the line. */
static json_t *json_text(const char *s)
{
        size_t len = strlen(s), w = 0;
        char *out = xmalloc(len * 3 + 1);
        for (size_t i = 0; i < len;) {
                size_t n = utf8_char_len(s + i, len - i);
                if (n) {
                        memcpy(out + w, s + i, n);
                        w += n;
                        i += n;
                } else {
                        memcpy(out + w, "\xEF\xBF\xBD", 3);
                        w += 3;
                        i++;
                }
        }
        json_t *j = json_stringn(out, w);
        free(out);
        return j;
}

static char *json_line(const struct log_record *rec, const char *ts, size_t *len)
{
        json_t *o = json_object();
        char *dumped, *line;
        json_object_set_new(o, "ts", json_string(ts));
        json_object_set_new(o, "level", json_string(level_name(rec->level, 1)));
        json_object_set_new(o, "pid", json_integer(rec->pid));
        if (rec->ctx)
                json_object_set_new(o, "ctx", json_text(rec->ctx));
        json_object_set_new(o, "msg", json_text(rec->msg));
        dumped = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!dumped) /* jansson could not allocate: the one policy */
                dumped = xstrdup("{\"level\":\"error\",\"msg\":\"a log line was lost: out of memory\"}");
        line = xasprintf("%s\n", dumped);
        free(dumped);
        *len = strlen(line);
        return line;
}

char *log_line_format(enum log_format format, const struct log_record *rec, size_t *len)
{
        char ts[40];
        format_ts(rec->ts_ms, ts, sizeof(ts));
        if (format == LOG_FORMAT_JSON)
                return json_line(rec, ts, len);
        char *line = xasprintf("%s %d %-5s %s%s%s%s\n", ts, rec->pid, level_name(rec->level, 0), rec->ctx ? "[" : "",
                               rec->ctx ? rec->ctx : "", rec->ctx ? "] " : "", rec->msg);
        *len = strlen(line);
        return line;
}
