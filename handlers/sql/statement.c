/* statement: the SQL handler's statement — message sources written in the SQL, bound as parameters. */
#include "statement.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/keyspec.h"
#include "base/mem.h"
#include "base/record.h"
#include "base/strbuf.h"

enum param_kind { P_TEMPLATE, P_IDEM_KEY, P_TOPIC, P_PARTITION, P_OFFSET };

struct sql_param {
        enum param_kind kind;
        char *text;           /* as written, braces included */
        struct keytmpl *tmpl; /* P_TEMPLATE */
};

/* What the statement is being built into. */
struct build {
        struct sql_statement *st;
        struct strbuf out;
};

/* The sources of dedupd's own, beside the key templates'. */
static int own_source(const char *name, enum param_kind *kind)
{
        static const struct {
                const char *name;
                enum param_kind kind;
        } own[] = {{"idem_key", P_IDEM_KEY}, {"topic", P_TOPIC}, {"partition", P_PARTITION}, {"offset", P_OFFSET}};
        for (size_t i = 0; i < sizeof(own) / sizeof(*own); i++)
                if (!strcmp(name, own[i].name)) {
                        *kind = own[i].kind;
                        return 1;
                }
        return 0;
}

/* The parameter number of source `text` ("{json:a}"), added when new; 0 with err. */
static size_t param_of(struct build *b, const char *text, char *err, size_t errsz)
{
        struct sql_statement *st = b->st;
        char name[256];
        for (size_t i = 0; i < st->nparams; i++)
                if (!strcmp(st->params[i].text, text))
                        return i + 1;
        if (st->nparams == SQL_STATEMENT_MAX_PARAMS) {
                snprintf(err, errsz, "the statement has more than %d distinct sources", SQL_STATEMENT_MAX_PARAMS);
                return 0;
        }
        struct sql_param p = {.text = xstrdup(text)};
        snprintf(name, sizeof(name), "%.*s", (int)strlen(text) - 2, text + 1);
        if (!own_source(name, &p.kind)) {
                char terr[300];
                p.kind = P_TEMPLATE;
                if (!(p.tmpl = keytmpl_compile(text, terr, sizeof(terr)))) {
                        snprintf(err, errsz, "source %s: %s", text, terr);
                        free(p.text);
                        return 0;
                }
                st->needs_json |= keytmpl_needs_json(p.tmpl);
        }
        st->params = xrealloc(st->params, (st->nparams + 1) * sizeof(*st->params));
        st->params[st->nparams++] = p;
        return st->nparams;
}

/* A brace at s that names a source: its length (braces included), else 0. */
static size_t source_at(const char *s)
{
        static const char *const prefixes[] = {"{json:", "{header:"};
        static const char *const names[] = {"{key}", "{idem_key}", "{topic}", "{partition}", "{offset}"};
        const char *end = strchr(s, '}');
        if (!end || memchr(s, '\n', (size_t)(end - s)))
                return 0;
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(*prefixes); i++)
                if (!strncmp(s, prefixes[i], strlen(prefixes[i])))
                        return (size_t)(end - s) + 1;
        for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
                if (!strncmp(s, names[i], strlen(names[i])))
                        return strlen(names[i]);
        return 0;
}

/* How far a quoted or commented stretch starting at s reaches (0: none starts here). */
static size_t skip_quoted(const char *s)
{
        const char *e;
        if (s[0] == '\'' || s[0] == '"') {
                for (e = s + 1; *e; e++)
                        if (*e == s[0] && e[1] == s[0])
                                e++; /* a doubled quote stays inside */
                        else if (*e == s[0])
                                return (size_t)(e - s) + 1;
                return strlen(s);
        }
        if (s[0] == '-' && s[1] == '-')
                return (e = strchr(s, '\n')) ? (size_t)(e - s) : strlen(s);
        if (s[0] == '/' && s[1] == '*')
                return (e = strstr(s + 2, "*/")) ? (size_t)(e - s) + 2 : strlen(s);
        if (s[0] == '$' && (s[1] == '$' || isalpha((unsigned char)s[1]) || s[1] == '_')) {
                const char *tag_end = s + 1;
                while (isalnum((unsigned char)*tag_end) || *tag_end == '_')
                        tag_end++;
                if (*tag_end != '$')
                        return 0;
                size_t tag = (size_t)(tag_end - s) + 1;
                for (e = tag_end + 1; *e; e++)
                        if (!strncmp(e, s, tag))
                                return (size_t)(e - s) + tag;
                return strlen(s);
        }
        return 0;
}

static int compile_into(struct build *b, const char *s, char *err, size_t errsz)
{
        while (*s) {
                size_t n;
                if ((n = skip_quoted(s))) {
                        strbuf_add(&b->out, s, n);
                } else if (s[0] == '$' && isdigit((unsigned char)s[1])) {
                        snprintf(err, errsz,
                                 "the statement has a parameter of its own ($%c...): write the message's "
                                 "sources in place instead ({json:field}, {idem_key}, ...)",
                                 s[1]);
                        return -1;
                } else if ((n = source_at(s))) {
                        char text[1100], num[16];
                        if (n >= sizeof(text)) {
                                snprintf(err, errsz, "a source is longer than %zu bytes", sizeof(text) - 1);
                                return -1;
                        }
                        snprintf(text, sizeof(text), "%.*s", (int)n, s);
                        size_t i = param_of(b, text, err, errsz);
                        if (!i)
                                return -1;
                        snprintf(num, sizeof(num), "$%zu", i);
                        strbuf_add(&b->out, num, strlen(num));
                } else {
                        n = 1;
                        strbuf_add(&b->out, s, 1);
                }
                s += n;
        }
        return 0;
}

struct sql_statement *sql_statement_compile(const char *src, char *err, size_t errsz)
{
        struct sql_statement *st = xcalloc(1, sizeof(*st));
        struct build b = {.st = st};
        size_t len = src ? strlen(src) : 0;
        if (!len || strspn(src, " \t\r\n") == len) {
                snprintf(err, errsz, "the statement is empty");
                goto error;
        }
        if (len > SQL_STATEMENT_MAX_LEN) {
                snprintf(err, errsz, "the statement is %zu bytes; at most %d are allowed", len, SQL_STATEMENT_MAX_LEN);
                goto error;
        }
        strbuf_add(&b.out, "", 0);
        if (compile_into(&b, src, err, errsz))
                goto error;
        st->sql = b.out.p;
        return st;
error:
        free(b.out.p);
        sql_statement_free(st);
        return NULL;
}

void sql_statement_free(struct sql_statement *st)
{
        if (!st)
                return;
        for (size_t i = 0; i < st->nparams; i++) {
                free(st->params[i].text);
                keytmpl_free(st->params[i].tmpl);
        }
        free(st->params);
        free(st->sql);
        free(st);
}

const char *sql_statement_param_text(const struct sql_statement *st, size_t i) { return st->params[i].text; }

static char *own_value(const struct sql_param *p, const struct dedupd_msg *m)
{
        char num[32];
        switch (p->kind) {
        case P_IDEM_KEY: return xstrdup(m->idem_key);
        case P_TOPIC: return xstrdup(m->topic);
        case P_PARTITION: snprintf(num, sizeof(num), "%" PRId32, m->partition); return xstrdup(num);
        case P_OFFSET:
        default: snprintf(num, sizeof(num), "%" PRId64, m->offset); return xstrdup(num);
        }
}

int sql_statement_bind(const struct sql_statement *st, const struct dedupd_msg *m, char **values, char *err,
                       size_t errsz)
{
        const struct record in = {m->topic,   m->key,        m->key_len, m->value, m->value_len,
                                  m->headers, m->header_cnt, NULL,       0,        NULL};
        json_t *root = NULL;
        size_t i = 0;
        for (size_t j = 0; j < st->nparams; j++)
                values[j] = NULL;
        if (st->needs_json && !(root = keyspec_load_json(&in, err, errsz)))
                return -1;
        for (; i < st->nparams; i++) {
                const struct sql_param *p = &st->params[i];
                values[i] = p->kind == P_TEMPLATE ? keytmpl_render(p->tmpl, &in, root, err, errsz) : own_value(p, m);
                if (!values[i])
                        break;
        }
        json_decref(root);
        if (i == st->nparams)
                return 0;
        sql_values_free(values, i);
        return -1;
}

void sql_values_free(char **values, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(values[i]);
                values[i] = NULL;
        }
}
