/* test_envfile: /etc/dedupd/environment as systemd's EnvironmentFile= reads it (env-file.c), line by line. */
#include <stdio.h>
#include <unistd.h>

#include "base/envfile.h"
#include "unit.h"

struct env_case {
        const char *name;
        const char *text;
        const char *want; /* each line as NAME=<VALUE>@LINE, or !LINE:why for a skipped one, joined by | */
};

static const struct env_case cases[] = {
        {"plain", "PGPASSWORD=s3cret\n", "PGPASSWORD=<s3cret>@1"},
        {"no final newline", "A=1", "A=<1>@1"},
        {"blanks around key and before value, trailing dropped", "  A =  x y  \n", "A=<x y>@1"},
        {"comments and blank lines", "# secret\n\n; also\n  # indented\nA=1\n", "A=<1>@5"},
        {"a # in a value is kept", "A=x#y\n", "A=<x#y>@1"},
        {"double quotes keep blanks", "A=\"  x  \"\n", "A=<  x  >@1"},
        {"double-quote escapes", "A=\"a\\\"b\\\\c\\$d\\`e\\nf\"\n", "A=<a\"b\\c$d`e\\nf>@1"},
        {"single quotes are literal", "A='a\\\"b $X'\n", "A=<a\\\"b $X>@1"},
        {"no ${VAR} expansion", "A=${HOME}\n", "A=<${HOME}>@1"},
        {"unquoted backslash escapes", "A=a\\ b\\\\c\n", "A=<a b\\c>@1"},
        {"unquoted escaped trailing blank kept", "A=a\\ \n", "A=<a >@1"},
        {"continuation", "A=one \\\ntwo\nB=2\n", "A=<one two>@1|B=<2>@3"},
        {"quoted value across lines", "A=\"x\ny\"\nB=1\n", "A=<x\ny>@1|B=<1>@3"},
        {"quotes then text joined", "A=\"x\"y\n", "A=<xy>@1"},
        {"empty value", "A=\nB=\"\"\n", "A=<>@1|B=<>@2"},
        {"a later one wins", "A=1\nA=2\n", "A=<1>@1|A=<2>@2"},
        {"comment continued by a backslash", "# x \\\nA=hidden\nB=1\n", "B=<1>@3"},
        {"no '='", "JUSTAWORD\nA=1\n", "!1:no '='|A=<1>@2"},
        {"bad name", "1A=x\nA-B=y\nexport A=z\n",
         "!1:not a variable name|!2:not a variable name|!3:not a variable name"},
        {"CRLF line ends", "A=1\r\nB=\"2\"\r\n", "A=<1>@1|B=<2>@2"},
        {"nothing", "", ""},
};

static void env_case(void **state)
{
        const struct env_case *c = *state;
        struct envfile e;
        char got[1024] = "";
        envfile_parse(c->text, strlen(c->text), &e);
        for (size_t i = 0; i < e.n; i++) {
                size_t n = strlen(got);
                if (e.v[i].name)
                        snprintf(got + n, sizeof(got) - n, "%s%s=<%s>@%d", i ? "|" : "", e.v[i].name, e.v[i].value,
                                 e.v[i].line);
                else
                        snprintf(got + n, sizeof(got) - n, "%s!%d:%s", i ? "|" : "", e.v[i].line, e.v[i].value);
        }
        /* A skipped line's want names part of its reason. */
        if (strchr(c->want, '!')) {
                char want[512];
                snprintf(want, sizeof(want), "%s", c->want);
                char *save = NULL;
                size_t i = 0;
                for (char *tok = strtok_r(want, "|", &save); tok; tok = strtok_r(NULL, "|", &save), i++) {
                        assert_true(i < e.n);
                        if (*tok == '!') {
                                assert_null(e.v[i].name);
                                assert_int_equal(e.v[i].line, atoi(tok + 1));
                                assert_contains(e.v[i].value, strchr(tok, ':') + 1);
                        } else {
                                assert_non_null(e.v[i].name);
                        }
                }
                assert_int_equal(i, e.n);
        } else {
                assert_string_equal(got, c->want);
        }
        envfile_free(&e);
}

/* Read from a file and applied: the environment the config's ${VAR} sees. */
static void read_and_apply(void **state)
{
        (void)state;
        char path[] = "/tmp/test_envfile.XXXXXX", err[256];
        int fd = mkstemp(path);
        struct envfile e;
        assert_true(fd >= 0);
        FILE *f = fdopen(fd, "w");
        fputs("DEDUPD_T_ENV_A=\"with blanks\"\nDEDUPD_T_ENV_B=2\n", f);
        fclose(f);
        setenv("DEDUPD_T_ENV_B", "from the shell", 1);
        assert_int_equal(envfile_read(path, &e, err, sizeof(err)), 0);
        envfile_apply(&e);
        assert_string_equal(getenv("DEDUPD_T_ENV_A"), "with blanks");
        assert_string_equal(getenv("DEDUPD_T_ENV_B"), "2");
        envfile_free(&e);
        unlink(path);
        assert_int_equal(envfile_read(path, &e, err, sizeof(err)), -1);
        assert_contains(err, "No such file");
}

int main(void)
{
        struct unit_list l = {0};
        unit_add_table(&l, env_case, cases);
        unit_add(&l, "read and apply", read_and_apply, NULL);
        return unit_run("envfile", &l);
}
