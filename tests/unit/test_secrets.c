/* test_secrets: ${file:/path} in config values, and the secrets it reads kept out of every line dedupd writes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/config.h"
#include "base/log.h"
#include "base/redact.h"
#include "unit.h"

static char dir[] = "/tmp/dedupd-test-secrets.XXXXXX";

/* path (a static buffer: copy it to keep two) of a file NAME in the test dir holding content, with mode */
static const char *secret_file(const char *name, const char *content, mode_t mode)
{
        static char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *fp = fopen(path, "w");
        assert_non_null(fp);
        fputs(content, fp);
        fclose(fp);
        chmod(path, mode);
        return path;
}

/* config_interpolate of "${file:PATH}" */
static char *interp(const char *path, char *err, size_t errsz)
{
        char in[512];
        snprintf(in, sizeof(in), "${file:%s}", path);
        err[0] = '\0';
        return config_interpolate(in, err, errsz);
}

static void file_content_without_trailing_newlines(void **state)
{
        (void)state;
        char err[512];
        char *v = interp(secret_file("pw", "S3cret-pw\n", 0600), err, sizeof(err));
        assert_non_null(v);
        assert_string_equal(v, "S3cret-pw");
        free(v);
        v = interp(secret_file("crlf", "tok en\r\n\n", 0600), err, sizeof(err));
        assert_string_equal(v, "tok en");
        free(v);
        /* inside a conninfo, beside an environment variable */
        char in[512];
        snprintf(in, sizeof(in), "host=${DEDUPD_TEST_HOST} password=${file:%s} user=u",
                 secret_file("pw2", "p@ss", 0600));
        v = config_interpolate(in, err, sizeof(err));
        assert_string_equal(v, "host=db.internal password=p@ss user=u");
        free(v);
}

static void missing_or_bad_files_name_the_path(void **state)
{
        (void)state;
        char err[512], path[300];
        snprintf(path, sizeof(path), "%s/no-such-file", dir);
        assert_null(interp(path, err, sizeof(err)));
        assert_contains(err, path);
        assert_contains(err, "No such file or directory");

        assert_null(interp("relative/pw", err, sizeof(err)));
        assert_contains(err, "the path must be absolute");

        assert_null(interp(dir, err, sizeof(err)));
        assert_contains(err, "not a regular file");

        if (geteuid() != 0) { /* root reads a 0000 file anyway */
                assert_null(interp(secret_file("locked", "Hidden-1234", 0000), err, sizeof(err)));
                assert_contains(err, "Permission denied");
        }
}

/* A config error about a value read from a file names file:line:column and
 * the path, never what the file holds. */
static void config_errors_locate_and_hide(void **state)
{
        (void)state;
        struct config_errors errs = {0};
        char yaml[1024];
        const char *num = secret_file("num", "notanumber-Zq9\n", 0600);
        snprintf(yaml, sizeof(yaml),
                 "namespace: svc\n"
                 "postgres: {conninfo: \"dbname=x password=${file:%s/absent}\"}\n"
                 "kafka: {bootstrap.servers: \"b:9092\", group.id: g}\n"
                 "shutdown_timeout_ms: \"${file:%s}\"\n"
                 "topics:\n"
                 "  - {name: t, key: {subject: \"{key}\"}, handler: {path: h.so}}\n",
                 dir, num);
        struct config *cfg = config_load_string("t.yaml", yaml, &errs);
        assert_null(cfg);
        assert_true(errs.cnt >= 2);
        char all[4096] = "";
        for (size_t i = 0; i < errs.cnt; i++) {
                strncat(all, errs.msgs[i], sizeof(all) - strlen(all) - 2);
                strcat(all, "\n");
        }
        assert_contains(all, "t.yaml:2:");
        assert_contains(all, "/absent}: cannot read the secret file");
        assert_contains(all, "t.yaml:4:");
        if (strstr(all, "notanumber-Zq9"))
                fail_msg("a secret in a config error: %s", all);
        config_errors_clear(&errs);
}

/* --print (config_dump) and every log line hide the secrets. */
static void dump_and_log_hide_secrets(void **state)
{
        (void)state;
        struct config_errors errs = {0};
        char yaml[1024];
        char pw[256], hp[256];
        snprintf(pw, sizeof(pw), "%s", secret_file("kpw", "Kafka-Pw-77\n", 0600));
        snprintf(hp, sizeof(hp), "%s", secret_file("hpw", "Handler-Pw-88", 0600));
        snprintf(yaml, sizeof(yaml),
                 "namespace: svc\n"
                 "postgres: {conninfo: \"dbname=x\"}\n"
                 "kafka: {bootstrap.servers: \"b:9092\", group.id: g, sasl.username: u,"
                 " sasl.password: \"${file:%s}\"}\n"
                 "topics:\n"
                 "  - {name: t, key: {subject: \"{key}\"}, handler: {path: h.so, config: {dsn: \"pw=${file:%s}\"}}}\n",
                 pw, hp);
        struct config *cfg = config_load_string("t.yaml", yaml, &errs);
        assert_non_null(cfg);
        char *buf = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&buf, &len);
        config_dump(cfg, fp);
        fclose(fp);
        assert_contains(buf, "kafka.sasl.password: (set, not shown)");
        assert_contains(buf, "kafka.sasl.username: u");
        if (strstr(buf, "Kafka-Pw-77") || strstr(buf, "Handler-Pw-88"))
                fail_msg("a secret in the dump: %s", buf);
        free(buf);
        config_free(cfg);

        char logpath[300];
        snprintf(logpath, sizeof(logpath), "%s/log", dir);
        FILE *lf = fopen(logpath, "w+");
        log_set_fd(fileno(lf));
        log_error("t", "connect failed with password Kafka-Pw-77 and Handler-Pw-88, twice: Kafka-Pw-77");
        log_set_fd(2);
        char line[512] = "";
        rewind(lf);
        assert_non_null(fgets(line, sizeof(line), lf));
        fclose(lf);
        assert_contains(line, "password (secret) and (secret), twice: (secret)");
}

static void redact_ignores_short_values(void **state)
{
        (void)state;
        redact_add("ab");
        assert_false(redact_contains("a cab"));
        redact_add("LongerOne");
        char *t = redact_text("xLongerOnex");
        assert_string_equal(t, "x(secret)x");
        free(t);
        assert_null(redact_text("nothing here"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(file_content_without_trailing_newlines),
                cmocka_unit_test(missing_or_bad_files_name_the_path),
                cmocka_unit_test(config_errors_locate_and_hide),
                cmocka_unit_test(dump_and_log_hide_secrets),
                cmocka_unit_test(redact_ignores_short_values),
        };
        struct unit_list l = {0};
        if (!mkdtemp(dir))
                return 1;
        setenv("DEDUPD_TEST_HOST", "db.internal", 1);
        unit_add_tests(&l, tests, sizeof(tests) / sizeof(tests[0]));
        int rc = unit_run("secrets", &l);
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd)) {
        }
        return rc;
}
