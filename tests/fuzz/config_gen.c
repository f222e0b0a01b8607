/* config_gen: a YAML configuration generated from the config table's own rows, each row's value chosen by the fuzzer's bytes. */
#include "config_gen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config_impl.h"
#include "base/strbuf.h"

/* What a mutation makes of a row. A row no mutation names is C_BASE: an empty list of
 * mutations is a config that loads. */
enum choice {
        C_BASE = 0, /* required: a valid value; optional: left out */
        C_VALID,    /* a valid value, also for an optional row */
        C_NULL,     /* nothing, ~, null, !!null */
        C_EMPTY,    /* "" */
        C_LIST,     /* a list where it does not belong */
        C_MAP,      /* a mapping where it does not belong */
        C_ODD,      /* a boundary or an odd spelling of the row's type */
        C_TWICE,    /* the key twice */
        C_UNKNOWN,  /* an unknown key beside it */
        C_DEEP,     /* nested up to 40 levels */
        C_ANCHOR,   /* a valid value with an anchor, for a later alias */
        C_ALIAS,    /* an alias of an earlier anchor */
        C_ENV,      /* ${VAR} forms: unset, empty, with a default, broken */
        C_RAW,      /* bytes of the input as the value */
        C_COUNT
};

/* Four bytes of the input: which row (numbered as the walk visits them, every topic's rows
 * and kafka's entries included), what becomes of it, and two bytes for what it needs to pick
 * (a palette's entry, a count, a length). Naming a row outright, rather than reading a byte
 * per row in order, lets one short input reach any row: a null topic name is four bytes. */
struct mutation {
        uint8_t row, choice, a, b;
};

struct gen {
        const uint8_t *data; /* the whole input, for C_RAW */
        size_t size;
        const struct mutation *m;
        size_t mcnt;
        const struct gen_env *env;
        struct strbuf out;
        int source;                 /* the broker the text names: its place in the broker table */
        int topic;                  /* index of the topic being written */
        int anchors;                /* &a0 ... defined so far */
        unsigned row;               /* rows visited so far */
        unsigned keys;              /* keys written so far */
        const struct mutation *cur; /* the mutation of the row being written, or NULL */
        unsigned taken;             /* bytes it gave so far */
        uint32_t rng;
};

/* The current row's next byte: its mutation's a and b, then a sequence they seed. */
static unsigned take(struct gen *g)
{
        if (!g->cur)
                return 0;
        switch (g->taken++) {
        case 0: return g->cur->a;
        case 1: return g->cur->b;
        default:
                g->rng ^= g->rng << 13;
                g->rng ^= g->rng >> 17;
                g->rng ^= g->rng << 5;
                return g->rng >> 24;
        }
}

/* The next row: what its mutation (the first one naming it) makes of it. */
static enum choice choose(struct gen *g)
{
        g->row++;
        g->cur = NULL;
        g->taken = 0;
        for (size_t i = 0; i < g->mcnt && !g->cur; i++)
                if (g->m[i].row == (g->row & 0xff))
                        g->cur = &g->m[i];
        if (!g->cur)
                return C_BASE;
        g->rng = 0x9e3779b9u ^ ((uint32_t)g->cur->a << 8 | g->cur->b) ^ g->row << 16;
        return (enum choice)(g->cur->choice % C_COUNT);
}

static void emitf(struct gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emitf(struct gen *g, const char *fmt, ...)
{
        char buf[256];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        strbuf_add(&g->out, buf, n < 0 ? 0 : (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static void indent(struct gen *g, int n) { emitf(g, "%*s", n, ""); }

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define PICK(g, a) ((a)[take(g) % COUNT(a)])

/* ---- the rows' valid values ------------------------------------------------- */

/* "@K" "@P" "@N" "@A" "@H": the env's endpoints and handler; "@T": this topic's name. */
struct palette {
        const char *path; /* the row, topics' and classes' rows without an index */
        const char *v[9];
};

static const struct palette palettes[] = {
        {"namespace", {"svc", "payments-service", "n s"}},
        {"postgres.conninfo", {"@P"}},
        {"rabbitmq.url", {"@A", "amqp://127.0.0.1", "http://h/", "amqps://u:p@127.0.0.1:1/v"}},
        {"rabbitmq.ca_file", {"/nonexistent/ca.pem", "/etc/hostname"}},
        {"rabbitmq.dead_letter.exchange", {"dlx", "amq.direct"}},
        {"nats.url", {"@N"}},
        {"nats.stream", {"S", "a.b", "*"}},
        {"nats.durable", {"d", "a.b", "x y"}},
        {"nats.creds_file", {"/nonexistent/c.creds", "/etc/hostname"}},
        {"nats.token", {"t0k3n"}},
        {"nats.tls_ca", {"/nonexistent/ca.pem", "/etc/hostname"}},
        {"nats.dead_letter.subject", {"dlq.x", "x y", ">"}},
        {"topics.name", {"@T", "orders.v1", "a b", "x*", ">", "q"}},
        {"topics.key.subject",
         {"{json:id}", "{key}", "{header:h}", "o-{json:a.b[0]}", "{amqp:message_id}", "{json:id}{json:id}"}},
        {"topics.key.action", {"PAY", "{header:a}", "{json:kind}"}},
        {"topics.key.request", {"{header:request-id}", "r-{json:n}"}},
        {"topics.handler.path", {"@H", "/nonexistent/h.so", "/", "/etc/hostname"}},
        {"topics.dead_letter.topic", {"dead", "t0", "@T"}},
        {"topics.retention", {"c0", "c1", "nope"}},
        {"topics.reply.header", {"reply-to", ""}},
        {"topics.reply.correlation_header", {"correlation-id", "c"}},
        {"http.listen",
         {"", "127.0.0.1:0", "0.0.0.0:9400", "[::1]:0", "localhost:0", ":9400", "x", "127.0.0.1:99999", "[::]:0"}},
};

/* Trees are YAML as the handler (or the fingerprint) gets it. */
static const struct palette trees[] = {
        {"topics.handler.config",
         {"{a: 1, b: [x, y], c: {d: e}}", "{}", "[1, 2]", "x", "{k: \"${DEDUPD_FUZZ_UNSET}\"}"}},
        {"topics.fingerprint.fields", {"[user_id, amount]", "[a..b]", "[]", "x", "[[a]]", "[\"\"]"}},
};

static const struct palette *palette_of(const struct palette *tab, size_t cnt, const char *path)
{
        for (size_t i = 0; i < cnt; i++)
                if (!strcmp(tab[i].path, path))
                        return &tab[i];
        return NULL;
}

static size_t palette_size(const struct palette *pl)
{
        size_t n = 0;
        while (n < COUNT(pl->v) && pl->v[n])
                n++;
        return n;
}

/* A double-quoted YAML scalar of s, escaped. */
static void emit_quoted(struct gen *g, const char *s)
{
        strbuf_adds(&g->out, "\"");
        for (; *s; s++) {
                if (*s == '"' || *s == '\\')
                        emitf(g, "\\%c", *s);
                else
                        strbuf_add(&g->out, s, 1);
        }
        strbuf_adds(&g->out, "\"");
}

static void emit_palette_value(struct gen *g, const char *v)
{
        const struct gen_env *e = g->env;
        char name[32];
        if (v[0] != '@') {
                emit_quoted(g, v);
                return;
        }
        snprintf(name, sizeof(name), "t%d", g->topic);
        emit_quoted(g, v[1] == 'K'   ? e->kafka
                       : v[1] == 'P' ? e->conninfo
                       : v[1] == 'N' ? e->nats_url
                       : v[1] == 'A' ? e->amqp_url
                       : v[1] == 'H' ? e->handler
                                     : name);
}

static void emit_valid(struct gen *g, const struct field *f, const char *path, int first)
{
        static const char *const durations[] = {"250ms", "30s", "5m", "48h", "7d", "1000"};
        static const char *const bools[] = {"true", "false", "yes", "no", "on", "off"};
        const struct palette *pl;
        size_t n = 0;
        switch (f->type) {
        case F_STR:
                pl = palette_of(palettes, COUNT(palettes), path);
                /* the first of a palette is what a loading config has */
                emit_palette_value(g, pl ? pl->v[first ? 0 : take(g) % palette_size(pl)] : "x");
                break;
        case F_INT: {
                long v[] = {f->min, f->max, f->def ? atol(f->def) : f->min, f->min + (f->max - f->min) / 2};
                emitf(g, "%ld", first ? v[2] : v[take(g) % COUNT(v)]);
                break;
        }
        case F_DURATION: emitf(g, "%s", first ? "7d" : PICK(g, durations)); break;
        case F_BOOL: emitf(g, "%s", PICK(g, bools)); break;
        case F_ENUM:
                while (f->names[n].name)
                        n++;
                emitf(g, "%s", f->names[first ? 0 : take(g) % n].name);
                break;
        case F_TREE:
                pl = palette_of(trees, COUNT(trees), path);
                emitf(g, "%s", pl ? pl->v[take(g) % palette_size(pl)] : "{}");
                break;
        default: emitf(g, "x"); break;
        }
}

/* ---- the mutations ------------------------------------------------------------ */

static void emit_odd(struct gen *g, const struct field *f)
{
        static const char *const ints[] = {
                "-0",  "+5",        "0x10", "1e3", "9223372036854775808", "\" 5\"", "1.5", "-9223372036854775809",
                "'7'", "2147483648"};
        static const char *const durations[] = {
                "0", "-1s", "1w", "99999999999999d", "5 m", "1h30m", "ms", "9223372036854775807", "1.5s", "0ms"};
        static const char *const bools[] = {"True", "1", "y", "'true'", "TRUE"};
        static const char *const strs[] = {"\"null\"",    "\"\xff\xfe\"", "\"{offset}\"",
                                           "\"{json:}\"", "\"}{\"",       "\"\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80\"",
                                           "\"\\x00a\"",  "\"a\\nb\"",    "\"${DEDUPD_FUZZ_LONG}\"",
                                           "\" \""};
        unsigned k = take(g);
        switch (f->type) {
        case F_INT:
                if (k % 3 == 0)
                        emitf(g, "%ld", k & 4 ? f->max + 1 : f->min - 1);
                else
                        emitf(g, "%s", ints[k % COUNT(ints)]);
                break;
        case F_DURATION: emitf(g, "%s", durations[k % COUNT(durations)]); break;
        case F_BOOL: emitf(g, "%s", bools[k % COUNT(bools)]); break;
        case F_ENUM: emitf(g, "%s", k & 1 ? "\"kafka \"" : "DEAD-LETTER"); break;
        default:
                if (k % 4 == 0) {
                        emitf(g, "\"");
                        for (int i = 0; i < 4000; i++)
                                strbuf_adds(&g->out, "x");
                        emitf(g, "\"");
                } else {
                        emitf(g, "%s", strs[k % COUNT(strs)]);
                }
        }
}

/* Bytes of the input as a double-quoted value: no '/' (a path stays relative to the working
 * directory, where no shared object lives), some bytes raw (not UTF-8), the rest escaped. */
static void emit_raw(struct gen *g)
{
        unsigned len = take(g) % 64, from = take(g);
        strbuf_adds(&g->out, "\"");
        for (unsigned i = 0; i < len && g->size; i++) {
                unsigned char b = g->data[(from + i) % g->size];
                if (b == '/')
                        b = '_';
                if ((b >= 0x20 && b < 0x7f && b != '"' && b != '\\') || (b >= 0x80 && (b & 1)))
                        strbuf_add(&g->out, &b, 1);
                else
                        emitf(g, "\\x%02x", b);
        }
        strbuf_adds(&g->out, "\"");
}

static void emit_deep(struct gen *g)
{
        unsigned d = take(g) % 40, map = d & 1;
        for (unsigned i = 0; i < d; i++)
                emitf(g, "%s", map ? "{a: " : "[");
        emitf(g, "x");
        for (unsigned i = 0; i < d; i++)
                emitf(g, "%s", map ? "}" : "]");
}

/* A scalar row's value for choice c (C_BASE and C_VALID: a valid one). */
static void emit_value(struct gen *g, const struct field *f, const char *path, enum choice c)
{
        static const char *const nulls[] = {"", "~", "null", "!!null ''", "NULL", "Null"};
        static const char *const envs[] = {"\"${DEDUPD_FUZZ_UNSET}\"",
                                           "\"${DEDUPD_FUZZ_EMPTY}\"",
                                           "\"${DEDUPD_FUZZ_EMPTY:-5}\"",
                                           "\"${\"",
                                           "\"$${X}\"",
                                           "\"${DEDUPD_FUZZ_SET}\"",
                                           "\"${:-x}\""};
        switch (c) {
        case C_NULL: emitf(g, "%s", PICK(g, nulls)); break;
        case C_EMPTY: emitf(g, "\"\""); break;
        case C_LIST: emitf(g, "[a, b]"); break;
        case C_MAP: emitf(g, "{x: 1}"); break;
        case C_ODD: emit_odd(g, f); break;
        case C_DEEP: emit_deep(g); break;
        case C_ANCHOR:
                emitf(g, "&a%d ", g->anchors++);
                emit_valid(g, f, path, 0);
                break;
        case C_ALIAS:
                if (g->anchors)
                        emitf(g, "*a%u", take(g) % (unsigned)g->anchors);
                else
                        emit_valid(g, f, path, 1);
                break;
        case C_ENV: emitf(g, "%s", PICK(g, envs)); break;
        case C_RAW: emit_raw(g); break;
        case C_VALID: emit_valid(g, f, path, 0); break;
        default: emit_valid(g, f, path, 1); break;
        }
}

/* ---- the walk over the rows --------------------------------------------------- */

static void emit_rows(struct gen *g, const struct field *rows, const char *prefix, int ind);

/* The brokers source: may name. */
static size_t sources_known(void)
{
        size_t n = 0;
        while (config_broker_at(n))
                n++;
        return n;
}

/* Present in the config that loads: required, or what the chosen source needs. */
static int base_present(const struct gen *g, const struct field *f, const char *path)
{
        if (f->required)
                return 1;
        const char *source = config_broker_at((size_t)g->source)->name;
        if (!strcmp(source, "kafka"))
                return !strcmp(path, "kafka");
        if (!strcmp(source, "nats"))
                return !strcmp(path, "nats") || !strcmp(path, "nats.stream") || !strcmp(path, "nats.url");
        return !strcmp(path, "rabbitmq") || !strcmp(path, "rabbitmq.url");
}

static void emit_key(struct gen *g, int ind, const char *name)
{
        g->keys++;
        indent(g, ind);
        emitf(g, "%s:", name);
}

/* kafka: what the source needs, a few properties from a list that cannot run or fetch
 * anything (no kinit command, no plug-ins, no OIDC), each with a right or a wrong value. */
static void emit_kafka(struct gen *g, int ind, enum choice c)
{
        static const char *const props[][3] = {
                {"session.timeout.ms", "6000", "abc"},
                {"socket.timeout.ms", "100", "-1"},
                {"client.id", "c", ""},
                {"enable.auto.offset.store", "false", "true"},
                {"partition.assignment.strategy", "range", "cooperative-sticky"},
                {"security.protocol", "plaintext", "bogus"},
                {"sasl.mechanisms", "PLAIN", "SCRAM-SHA-512"},
                {"sasl.password", "p", ""},
                {"message.max.bytes", "1000", "2000000000"},
                {"no.such.property", "1", ""},
                {"group.instance.id", "i", ""},
                {"metadata.broker.list", "@K", ""},
                {"statistics.interval.ms", "0", "x"},
        };
        static const struct field kv_row = {.name = "kafka.*", .type = F_STR};
        int extras = c == C_VALID ? (int)(take(g) % 4) : 0; /* at most 3 */
        const char *const *extra[3];
        const char *extra_value[3];
        for (int i = 0; i < extras; i++) { /* picked now: the entries below are rows of their own */
                extra[i] = props[take(g) % COUNT(props)];
                extra_value[i] = extra[i][1 + take(g) % 2];
        }
        const char *required[] = {"bootstrap.servers", "group.id"};
        for (int i = 0; i < 2; i++) {
                enum choice e = choose(g);
                if (e == C_LIST)
                        continue; /* left out */
                for (int twice = 0; twice <= (e == C_TWICE); twice++) {
                        emit_key(g, ind, required[i]);
                        emitf(g, " ");
                        if (e == C_NULL || e == C_EMPTY || e == C_ENV || e == C_RAW || e == C_MAP)
                                emit_value(g, &kv_row, "kafka.*", e);
                        else
                                emit_quoted(g, i ? "g" : g->env->kafka);
                        emitf(g, "\n");
                }
        }
        for (int i = 0; i < extras; i++) {
                emit_key(g, ind, extra[i][0]);
                emitf(g, " ");
                emit_quoted(g, !strcmp(extra_value[i], "@K") ? g->env->kafka : extra_value[i]);
                emitf(g, "\n");
        }
}

/* A nested mapping's rows under "name:", or left out when nothing is in it and it may be. */
static void emit_section(struct gen *g, const struct field *f, const char *path, int ind, int must)
{
        struct strbuf saved = g->out;
        unsigned keys = g->keys;
        g->out = (struct strbuf){0};
        emit_rows(g, f->sub, path, ind + 2);
        struct strbuf body = g->out;
        int empty = g->keys == keys; /* comments at most */
        g->out = saved;
        if (!empty || must) {
                emit_key(g, ind, f->name);
                emitf(g, empty ? " {}\n" : "\n");
                if (!empty)
                        strbuf_add(&g->out, body.p, body.len);
        }
        free(body.p);
}

static void emit_topics(struct gen *g, const struct field *f, int ind, enum choice c)
{
        int cnt = c == C_VALID ? 1 + (int)(take(g) % 4) : 1;
        emit_key(g, ind, f->name);
        emitf(g, "\n");
        for (g->topic = 0; g->topic < cnt; g->topic++) {
                enum choice item = choose(g);
                indent(g, ind + 2);
                if (item == C_NULL) {
                        emitf(g, "-\n");
                        continue;
                }
                if (item == C_ODD) {
                        emitf(g, "- x\n");
                        continue;
                }
                emitf(g, "-\n");
                emit_rows(g, f->sub, "topics", ind + 4);
        }
}

static void emit_classes(struct gen *g, const struct field *f, int ind, enum choice c)
{
        if (c != C_VALID)
                return;
        int cnt = 1 + (int)(take(g) % 2);
        emit_key(g, ind, f->name);
        emitf(g, "\n");
        for (int i = 0; i < cnt; i++) {
                enum choice item = choose(g);
                emit_key(g, ind + 2, item == C_TWICE ? "c0" : i ? "c1" : "c0");
                if (item == C_NULL) {
                        emitf(g, "\n");
                        continue;
                }
                emitf(g, "\n");
                emit_rows(g, f->sub, "retention_classes", ind + 4);
        }
}

/* A row whose value is a mapping or a list of its own, as c makes it. */
static void emit_compound(struct gen *g, const struct field *f, const char *path, int ind, enum choice c)
{
        int present = base_present(g, f, path);
        if (c == C_BASE || c == C_VALID || c == C_TWICE || c == C_UNKNOWN) {
                for (int twice = 0; twice <= (c == C_TWICE); twice++) {
                        if (f->type == F_SECTION)
                                emit_section(g, f, path, ind, present || c != C_BASE);
                        else if (f->type == F_TOPICS)
                                emit_topics(g, f, ind, c);
                        else if (f->type == F_CLASSES)
                                emit_classes(g, f, ind, c);
                        else if (present || c != C_BASE) {
                                emit_key(g, ind, f->name);
                                emitf(g, "\n");
                                emit_kafka(g, ind + 2, c);
                        }
                }
                return;
        }
        emit_key(g, ind, f->name);
        emitf(g, " ");
        emit_value(g, f, path, c == C_MAP ? C_ODD : c);
        emitf(g, "\n");
}

static void emit_row(struct gen *g, const struct field *f, const char *path, int ind)
{
        if (f->type == F_OWN) /* a broker's own row, written as any other */
                f = f->sub;
        enum choice c = choose(g);
        if (g->env->number_rows) {
                indent(g, ind);
                emitf(g, "# row %u: %s\n", g->row & 0xff, path);
        }
        if (c == C_UNKNOWN) {
                indent(g, ind);
                emitf(g, "zz_%s: 1\n", f->name);
        }
        if (f->type == F_SECTION || f->type == F_TOPICS || f->type == F_CLASSES || f->type == F_KV) {
                emit_compound(g, f, path, ind, c);
                return;
        }
        if (f->type == F_ENUM && !strcmp(path, "source") && c == C_VALID)
                g->source = (int)(take(g) % sources_known());
        if ((c == C_BASE || c == C_UNKNOWN) && !base_present(g, f, path))
                return;
        for (int twice = 0; twice <= (c == C_TWICE); twice++) {
                emit_key(g, ind, f->name);
                emitf(g, " ");
                if (f->type == F_ENUM && !strcmp(path, "source") && c == C_VALID)
                        emitf(g, "%s", f->names[g->source].name);
                else
                        emit_value(g, f, path, c == C_UNKNOWN ? C_BASE : c);
                emitf(g, "\n");
        }
}

static void emit_rows(struct gen *g, const struct field *rows, const char *prefix, int ind)
{
        for (const struct field *f = rows; f->name; f++) {
                char path[160];
                snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", f->name);
                emit_row(g, f, path, ind);
        }
}

char *gen_config(const uint8_t *data, size_t size, const struct gen_env *env, int *source)
{
        struct gen g = {.data = data,
                        .size = size,
                        .m = (const struct mutation *)data,
                        .mcnt = size / sizeof(struct mutation),
                        .env = env,
                        .source = 0 /* source's default: the table's first */};
        emit_rows(&g, config_rows(), "", 0);
        strbuf_add(&g.out, "", 1);
        *source = g.source;
        return g.out.p;
}

int gen_env_endpoint(const struct gen_env *env, const char *v)
{
        return v && (!strcmp(v, env->kafka) || !strcmp(v, env->conninfo) || !strcmp(v, env->nats_url) ||
                     !strcmp(v, env->amqp_url));
}
