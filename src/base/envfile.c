/* envfile: a systemd EnvironmentFile= read as systemd reads it, so dedupctl sees the unit's environment. */
#include "base/envfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/strbuf.h"

enum state { PRE_KEY, KEY, PRE_VALUE, VALUE, VALUE_ESCAPE, SQUOTE, DQUOTE, DQUOTE_ESCAPE, COMMENT, COMMENT_ESCAPE };

struct parse {
        struct envfile *out;
        struct strbuf key, value;
        size_t value_end; /* an unquoted value's length without its trailing blanks */
        int line, key_line;
};

static void buf_putc(struct strbuf *b, char c) { strbuf_add(b, &c, 1); }
static const char *buf_str(const struct strbuf *b) { return b->p ? b->p : ""; }
static void buf_reset(struct strbuf *b)
{
        b->len = 0;
        if (b->p)
                b->p[0] = '\0';
}

static int blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

static int name_valid(const char *s)
{
        if (!*s || (*s >= '0' && *s <= '9'))
                return 0;
        for (; *s; s++)
                if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
                        return 0;
        return 1;
}

static void add(struct parse *p, char *name, char *value)
{
        struct envfile *e = p->out;
        e->v = xrealloc(e->v, (e->n + 1) * sizeof(*e->v));
        e->v[e->n++] = (struct envfile_line){name, value, p->key_line};
}

/* The end of an assignment: kept, or skipped with why. */
static void finish(struct parse *p)
{
        const char *key = buf_str(&p->key);
        size_t klen = strlen(key);
        while (klen && blank(key[klen - 1]))
                klen--;
        char *name = xstrndup(key, klen);
        if (name_valid(name))
                add(p, name, xstrndup(buf_str(&p->value), p->value_end));
        else {
                add(p, NULL, xasprintf("'%s' is not a variable name: systemd skips this line", name));
                free(name);
        }
        buf_reset(&p->key);
        buf_reset(&p->value);
        p->value_end = 0;
}

/* Append c to the value; a blank outside quotes may turn out to be trailing. */
static void value_put(struct parse *p, char c, int keep)
{
        buf_putc(&p->value, c);
        if (keep || !blank(c))
                p->value_end = p->value.len;
}

static enum state step(struct parse *p, enum state s, char c)
{
        switch (s) {
        case PRE_KEY:
                if (c == '#' || c == ';')
                        return COMMENT;
                if (blank(c) || c == '\n')
                        return PRE_KEY;
                p->key_line = p->line;
                buf_putc(&p->key, c);
                return KEY;
        case KEY:
                if (c == '=')
                        return PRE_VALUE;
                if (c == '\n') {
                        add(p, NULL, xasprintf("no '=' after '%s': systemd skips this line", buf_str(&p->key)));
                        buf_reset(&p->key);
                        return PRE_KEY;
                }
                buf_putc(&p->key, c);
                return KEY;
        case PRE_VALUE:
                if (blank(c))
                        return PRE_VALUE;
                if (c == '\'')
                        return SQUOTE;
                if (c == '"')
                        return DQUOTE;
                /* fall through */
        case VALUE:
                if (c == '\n') {
                        finish(p);
                        return PRE_KEY;
                }
                if (c == '\\')
                        return VALUE_ESCAPE;
                value_put(p, c, 0);
                return VALUE;
        case VALUE_ESCAPE:
                if (c != '\n')
                        value_put(p, c, 1);
                return VALUE;
        case SQUOTE:
                if (c == '\'')
                        return PRE_VALUE;
                value_put(p, c, 1);
                return SQUOTE;
        case DQUOTE:
                if (c == '"')
                        return PRE_VALUE;
                if (c == '\\')
                        return DQUOTE_ESCAPE;
                value_put(p, c, 1);
                return DQUOTE;
        case DQUOTE_ESCAPE:
                if (c != '\n' && !strchr("\"\\`$", c))
                        value_put(p, '\\', 1);
                if (c != '\n')
                        value_put(p, c, 1);
                return DQUOTE;
        case COMMENT: return c == '\\' ? COMMENT_ESCAPE : c == '\n' ? PRE_KEY : COMMENT;
        case COMMENT_ESCAPE: return COMMENT;
        }
        return s;
}

void envfile_parse(const char *text, size_t len, struct envfile *out)
{
        struct parse p = {.out = out, .line = 1};
        enum state s = PRE_KEY;
        *out = (struct envfile){0};
        for (size_t i = 0; i < len; i++) {
                s = step(&p, s, text[i]);
                p.line += text[i] == '\n';
        }
        /* A last line without its newline (an open quote ends with the file). */
        if (s == KEY)
                step(&p, s, '\n');
        else if (s != PRE_KEY && s != COMMENT && s != COMMENT_ESCAPE)
                finish(&p);
        free(p.key.p);
        free(p.value.p);
}

int envfile_read(const char *path, struct envfile *out, char *err, size_t errsz)
{
        FILE *f = fopen(path, "r");
        struct strbuf text = {0};
        char chunk[4096];
        size_t n;
        *out = (struct envfile){0};
        if (!f) {
                snprintf(err, errsz, "%s: %s", path, strerror(errno));
                return -1;
        }
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
                strbuf_add(&text, chunk, n);
        if (ferror(f)) {
                snprintf(err, errsz, "%s: %s", path, strerror(errno));
                fclose(f);
                free(text.p);
                return -1;
        }
        fclose(f);
        envfile_parse(text.p ? text.p : "", text.len, out);
        free(text.p);
        return 0;
}

void envfile_apply(const struct envfile *e)
{
        for (size_t i = 0; i < e->n; i++)
                if (e->v[i].name)
                        setenv(e->v[i].name, e->v[i].value, 1);
}

void envfile_free(struct envfile *e)
{
        for (size_t i = 0; i < e->n; i++) {
                free(e->v[i].name);
                free(e->v[i].value);
        }
        free(e->v);
        *e = (struct envfile){0};
}
