/* test_log: the logger's lines as a user's log shipper reads them — JSON that parses, escaping, whole long lines, named suppressions. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "unit.h"

/* ---- capturing what the logger writes ------------------------------------- */

static int capture_fd = -1;
static char capture_path[64];

static void capture_start(void)
{
        snprintf(capture_path, sizeof(capture_path), "/tmp/test_log.XXXXXX");
        capture_fd = mkstemp(capture_path);
        assert_true(capture_fd >= 0);
        log_set_fd(capture_fd);
}

/* Everything written since capture_start, malloc'd. */
static char *capture_end(void)
{
        off_t size = lseek(capture_fd, 0, SEEK_END);
        char *buf = malloc((size_t)size + 1);
        assert_non_null(buf);
        assert_int_equal(pread(capture_fd, buf, (size_t)size, 0), size);
        buf[size] = '\0';
        log_set_fd(2);
        close(capture_fd);
        unlink(capture_path);
        return buf;
}

static size_t count_lines(const char *s)
{
        size_t n = 0;
        for (; *s; s++)
                n += *s == '\n';
        return n;
}

/* One line must be one JSON object with the logger's fields. */
static json_t *parse_line(const char *line, size_t len)
{
        json_error_t e;
        assert_true(len > 0 && line[len - 1] == '\n');
        assert_null(memchr(line, '\n', len - 1)); /* one line, whatever the message held */
        json_t *o = json_loadb(line, len, 0, &e);
        if (!o)
                fail_msg("not JSON (%s): %.*s", e.text, (int)len, line);
        assert_true(json_is_object(o));
        return o;
}

static const char *field(json_t *o, const char *name)
{
        json_t *v = json_object_get(o, name);
        if (!json_is_string(v))
                fail_msg("field %s missing or not a string", name);
        return json_string_value(v);
}

/* ---- the JSON line ---------------------------------------------------------- */

static void json_line_fields(void **state)
{
        (void)state;
        struct log_record rec = {1796115600123LL, 4242, LOG_WARN, "topic:payments/3", "batch rolled back"};
        size_t len;
        char *line = log_line_format(LOG_FORMAT_JSON, &rec, &len);
        assert_string_equal(line, "{\"ts\":\"2026-12-01T09:00:00.123Z\",\"level\":\"warn\",\"pid\":4242,"
                                  "\"ctx\":\"topic:payments/3\",\"msg\":\"batch rolled back\"}\n");
        json_t *o = parse_line(line, len);
        assert_string_equal(field(o, "level"), "warn");
        assert_int_equal(json_integer_value(json_object_get(o, "pid")), 4242);
        json_decref(o);
        free(line);
}

static void json_line_without_context(void **state)
{
        (void)state;
        struct log_record rec = {0, 1, LOG_ERROR, NULL, "x"};
        size_t len;
        char *line = log_line_format(LOG_FORMAT_JSON, &rec, &len);
        json_t *o = parse_line(line, len);
        assert_null(json_object_get(o, "ctx"));
        assert_string_equal(field(o, "level"), "error");
        assert_string_equal(field(o, "ts"), "1970-01-01T00:00:00.000Z");
        json_decref(o);
        free(line);
}

/* What a message may carry, and what a JSON reader must get back. */
static const struct escape_case {
        const char *name, *msg, *want;
} escapes[] = {
        {"json escaping: quotes and backslashes", "key a\"b\\c", "key a\"b\\c"},
        {"json escaping: newlines stay inside the line", "first\nsecond\r\nthird", "first\nsecond\r\nthird"},
        {"json escaping: control characters", "bell\a tab\t esc\x1b del\x7f", "bell\a tab\t esc\x1b del\x7f"},
        {"json escaping: UTF-8 kept", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
         "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"json escaping: a stray byte becomes U+FFFD", "bad \xff byte", "bad \xef\xbf\xbd byte"},
        {"json escaping: a truncated sequence", "cut \xe2\x82", "cut \xef\xbf\xbd\xef\xbf\xbd"},
        {"json escaping: an overlong form", "slash \xc0\xaf", "slash \xef\xbf\xbd\xef\xbf\xbd"},
        {"json escaping: a surrogate", "half \xed\xa0\x80", "half \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"json escaping: above U+10FFFF", "big \xf4\x90\x80\x80",
         "big \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
};

static void json_escaping(void **state)
{
        const struct escape_case *c = *state;
        struct log_record rec = {0, 1, LOG_INFO, "ctx \"q\"\n\xff", c->msg};
        size_t len;
        char *line = log_line_format(LOG_FORMAT_JSON, &rec, &len);
        json_t *o = parse_line(line, len);
        assert_string_equal(field(o, "msg"), c->want);
        assert_string_equal(field(o, "ctx"), "ctx \"q\"\n\xef\xbf\xbd");
        json_decref(o);
        free(line);
}

/* The default format is the one docs/operating.md (Logs) shows. */
static void human_line_unchanged(void **state)
{
        (void)state;
        struct log_record rec = {1796115600123LL, 4242, LOG_WARN, "topic:payments/3", "batch rolled back"};
        size_t len;
        char *line = log_line_format(LOG_FORMAT_HUMAN, &rec, &len);
        assert_string_equal(line, "2026-12-01T09:00:00.123Z 4242 WARN  [topic:payments/3] batch rolled back\n");
        free(line);
        rec.ctx = NULL;
        line = log_line_format(LOG_FORMAT_HUMAN, &rec, &len);
        assert_string_equal(line, "2026-12-01T09:00:00.123Z 4242 WARN  batch rolled back\n");
        free(line);
}

/* ---- through the logger ------------------------------------------------------ */

static void long_message_whole(void **state)
{
        (void)state;
        size_t n = 200000; /* fifty times what the old 4 KB buffer kept */
        char *big = malloc(n + 1);
        memset(big, 'k', n);
        big[n] = '\0';
        big[n - 1] = 'Z';
        log_set_format(LOG_FORMAT_JSON);
        capture_start();
        log_warn("topic:t", "keys: %s", big);
        char *out = capture_end();
        log_set_format(LOG_FORMAT_HUMAN);
        json_t *o = parse_line(out, strlen(out));
        const char *msg = field(o, "msg");
        assert_int_equal(strlen(msg), n + strlen("keys: "));
        assert_int_equal(msg[strlen(msg) - 1], 'Z');
        json_decref(o);
        free(out);
        free(big);
}

static void absurd_message_cut_and_says_so(void **state)
{
        (void)state;
        size_t n = LOG_MSG_MAX + 5000;
        char *big = malloc(n + 1);
        /* a two-byte character across the cut must not be split */
        for (size_t i = 0; i < n; i += 2)
                memcpy(big + i, "\xc3\xa9", 2);
        big[n] = '\0';
        capture_start();
        log_error("x", "%s", big);
        char *out = capture_end();
        assert_int_equal(count_lines(out), 1);
        assert_true(strlen(out) < LOG_MSG_MAX + 300);
        assert_contains(out, "... [cut: 5000 more bytes; a log message is written whole up to 1048576 bytes]\n");
        /* and the JSON form of it parses (nothing half a character) */
        log_set_format(LOG_FORMAT_JSON);
        capture_start();
        log_error("x", "%s", big);
        char *js = capture_end();
        log_set_format(LOG_FORMAT_HUMAN);
        json_t *o = parse_line(js, strlen(js));
        assert_null(strstr(field(o, "msg"), "\xef\xbf\xbd"));
        json_decref(o);
        free(js);
        free(out);
        free(big);
}

static void below_level_not_written(void **state)
{
        (void)state;
        capture_start();
        log_debug("x", "not at info");
        char *out = capture_end();
        assert_string_equal(out, "");
        free(out);
}

/* ---- rate limiting ------------------------------------------------------------ */

static void suppression_names_what(void **state)
{
        (void)state;
        struct log_ratelimit rl = {0};
        log_set_format(LOG_FORMAT_JSON);
        capture_start();
        for (int i = 0; i < 5; i++)
                log_limited(&rl, 2, 100, LOG_ERROR, "runner", "database unavailable: db%d", i);
        usleep(150 * 1000);
        log_limited(&rl, 2, 100, LOG_ERROR, "runner", "database unavailable: db%d", 5);
        char *out = capture_end();
        log_set_format(LOG_FORMAT_HUMAN);
        /* db0, db1, then the count for db2..db4 naming db4, then db5 */
        assert_int_equal(count_lines(out), 4);
        const char *l3 = strchr(strchr(out, '\n') + 1, '\n') + 1;
        json_t *o = parse_line(l3, (size_t)(strchr(l3, '\n') - l3 + 1));
        assert_string_equal(field(o, "ctx"), "runner");
        assert_string_equal(field(o, "level"), "error");
        assert_prefix(field(o, "msg"), "(3 similar messages suppressed over 0.");
        assert_contains(field(o, "msg"), " s; the last: database unavailable: db4)");
        json_decref(o);
        assert_contains(strchr(l3, '\n') + 1, "database unavailable: db5");
        free(out);
}

static void suppression_flushed(void **state)
{
        (void)state;
        struct log_ratelimit rl = {0};
        capture_start();
        log_limited(&rl, 1, 60000, LOG_WARN, "kafka", "refused %d", 1);
        log_limited(&rl, 1, 60000, LOG_WARN, "kafka", "refused %d", 2);
        log_ratelimit_flush(&rl);
        log_ratelimit_flush(&rl); /* nothing more to say */
        char *out = capture_end();
        assert_int_equal(count_lines(out), 2);
        assert_contains(out, "WARN  [kafka] (1 similar message suppressed over 0.0 s; the last: refused 2)\n");
        assert_null(rl.last_msg);
        free(out);
}

static void formats_parse(void **state)
{
        (void)state;
        assert_int_equal(log_format_parse("json"), LOG_FORMAT_JSON);
        assert_int_equal(log_format_parse("HUMAN"), LOG_FORMAT_HUMAN);
        assert_int_equal(log_format_parse("logfmt"), -1);
}

int main(void)
{
        struct unit_list l = {0};
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(json_line_fields),
                cmocka_unit_test(json_line_without_context),
                cmocka_unit_test(human_line_unchanged),
                cmocka_unit_test(long_message_whole),
                cmocka_unit_test(absurd_message_cut_and_says_so),
                cmocka_unit_test(below_level_not_written),
                cmocka_unit_test(suppression_names_what),
                cmocka_unit_test(suppression_flushed),
                cmocka_unit_test(formats_parse),
        };
        unit_add_tests(&l, tests, sizeof(tests) / sizeof(tests[0]));
        unit_add_table(&l, json_escaping, escapes);
        return unit_run("log", &l);
}
