/* keyspec: the business idempotency key — templates compiled once, derived per message. */
#include "base/keyspec.h"

#include "base/hex.h"
#include "base/mem.h"
#include "base/strbuf.h"
#include "base/utf8.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

enum part_kind { PART_LITERAL, PART_JSON, PART_HEADER, PART_KEY, PART_AMQP };

/* A JSON path step: an object member or an array index. */
struct path_step {
        char *member; /* NULL for an index */
        size_t index;
};

struct part {
        enum part_kind kind;
        char *text; /* literal text, header name, or the JSON path as written */
        struct path_step *steps;
        size_t step_cnt;
};

struct tmpl {
        struct part *parts;
        size_t cnt;
};

struct keyspec {
        struct tmpl t[3]; /* subject, action, request */
        int has_request;
        int needs_json;
};

static const char *const part_names[3] = {"subject", "action", "request"};

static void tmpl_free(struct tmpl *t)
{
        for (size_t i = 0; i < t->cnt; i++) {
                free(t->parts[i].text);
                for (size_t j = 0; j < t->parts[i].step_cnt; j++)
                        free(t->parts[i].steps[j].member);
                free(t->parts[i].steps);
        }
        free(t->parts);
        t->parts = NULL;
        t->cnt = 0;
}

static void seterr(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errsz, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errsz, fmt, ap);
        va_end(ap);
}

/* Parse "a.b[0].c" into steps. */
static int path_parse(const char *path, struct part *p, char *err, size_t errsz)
{
        const char *s = path;

        if (!*s) {
                seterr(err, errsz, "empty JSON path in {json:}");
                return -1;
        }
        while (*s) {
                struct path_step st = {0};
                if (*s == '[') {
                        char *end;
                        if (s[1] < '0' || s[1] > '9') {
                                seterr(err, errsz, "JSON path '%s': expected an index after '['", path);
                                return -1;
                        }
                        st.index = strtoul(s + 1, &end, 10);
                        if (*end != ']') {
                                seterr(err, errsz, "JSON path '%s': missing ']'", path);
                                return -1;
                        }
                        s = end + 1;
                } else {
                        size_t n = strcspn(s, ".[");
                        if (n == 0) {
                                seterr(err, errsz, "JSON path '%s': empty member name", path);
                                return -1;
                        }
                        st.member = xstrndup(s, n);
                        s += n;
                }
                p->steps = xrealloc(p->steps, (p->step_cnt + 1) * sizeof(*p->steps));
                p->steps[p->step_cnt++] = st;
                if (*s == '.') {
                        s++;
                        if (!*s || *s == '.' || *s == '[') {
                                seterr(err, errsz, "JSON path '%s': empty member name", path);
                                return -1;
                        }
                }
        }
        return 0;
}

static void steps_free(struct part *p)
{
        for (size_t j = 0; j < p->step_cnt; j++)
                free(p->steps[j].member);
        free(p->steps);
        p->steps = NULL;
        p->step_cnt = 0;
}

int keyspec_path_check(const char *path, char *err, size_t errsz)
{
        struct part p = {0};
        int rc = path_parse(path, &p, err, errsz);
        steps_free(&p);
        return rc;
}

static int tmpl_add(struct tmpl *t, struct part p, char *err, size_t errsz)
{
        t->parts = xrealloc(t->parts, (t->cnt + 1) * sizeof(*t->parts));
        t->parts[t->cnt++] = p;
        return 0;
}

/* Sources that change on every delivery or are made up by the consumer:
 * a key built from them deduplicates nothing. */
static const char *const refused_sources[] = {
        "offset", "partition", "timestamp", "time", "now", "uuid", "random", "topic",
};

/* The AMQP basic properties a key may read ({amqp:NAME}): the ones a
 * publisher sets per message. */
static const char *const amqp_props[] = {
        "message_id", "correlation_id", "type", "app_id", "user_id", "reply_to",
};

static int property_part(const char *name, struct part *p, char *err, size_t errsz)
{
        for (size_t i = 0; i < sizeof(amqp_props) / sizeof(*amqp_props); i++)
                if (!strcmp(name, amqp_props[i])) {
                        p->kind = PART_AMQP;
                        p->text = xstrdup(name);
                        return 0;
                }
        seterr(err, errsz,
               "unknown AMQP property '{amqp:%.64s}' (expected message_id, correlation_id, type, app_id, user_id or "
               "reply_to; AMQP headers are {header:NAME})",
               name);
        return -1;
}

/* The source between a template's braces ({json:PATH}, {header:NAME},
 * {key}, {amqp:PROPERTY}) into p; -1 with err for a source refused or
 * unknown. */
static int source_part(const char *ref, struct part *p, char *err, size_t errsz)
{
        if (!strncmp(ref, "json:", 5)) {
                p->kind = PART_JSON;
                p->text = xstrdup(ref + 5);
                if (!path_parse(ref + 5, p, err, errsz))
                        return 0;
                free(p->text);
                for (size_t j = 0; j < p->step_cnt; j++)
                        free(p->steps[j].member);
                free(p->steps);
                return -1;
        }
        if (!strncmp(ref, "header:", 7)) {
                if (!ref[7]) {
                        seterr(err, errsz, "{header:} needs a header name");
                        return -1;
                }
                p->kind = PART_HEADER;
                p->text = xstrdup(ref + 7);
                return 0;
        }
        if (!strcmp(ref, "key")) {
                p->kind = PART_KEY;
                return 0;
        }
        if (!strncmp(ref, "amqp:", 5))
                return property_part(ref + 5, p, err, errsz);
        for (size_t i = 0; i < sizeof(refused_sources) / sizeof(*refused_sources); i++) {
                if (!strcmp(ref, refused_sources[i])) {
                        seterr(err, errsz,
                               "{%s} is refused: it differs on every delivery or is generated by the consumer, "
                               "so a key built from it deduplicates nothing; use a business field "
                               "({json:...}, {header:...} or {key})",
                               ref);
                        return -1;
                }
        }
        seterr(err, errsz,
               "unknown key source '{%.64s%s}' (expected {json:PATH}, {header:NAME} or {key}; "
               "with source: rabbitmq also {amqp:PROPERTY})",
               ref, strlen(ref) > 64 ? "..." : "");
        return -1;
}

static int tmpl_compile(struct tmpl *t, const char *s, char *err, size_t errsz)
{
        size_t len = strlen(s);
        if (len > KEYSPEC_MAX_TEMPLATE_LEN) {
                seterr(err, errsz, "key template is %zu bytes; at most %d are allowed", len, KEYSPEC_MAX_TEMPLATE_LEN);
                return -1;
        }
        while (*s) {
                if (t->cnt == KEYSPEC_MAX_PARTS) {
                        seterr(err, errsz, "key template has more than %d parts (sources and literals)",
                               KEYSPEC_MAX_PARTS);
                        return -1;
                }
                struct part p = {0};
                if (*s == '{') {
                        const char *end = strchr(s, '}');
                        if (!end) {
                                seterr(err, errsz, "unterminated '{' in key template");
                                return -1;
                        }
                        char *ref = xstrndup(s + 1, (size_t)(end - s - 1));
                        int rc = source_part(ref, &p, err, errsz);
                        free(ref);
                        if (rc)
                                return -1;
                        s = end + 1;
                } else {
                        size_t n = strcspn(s, "{");
                        p.kind = PART_LITERAL;
                        p.text = xstrndup(s, n);
                        s += n;
                }
                if (tmpl_add(t, p, err, errsz)) {
                        free(p.text);
                        return -1;
                }
        }
        return 0;
}

int keyspec_template_check(const char *tmpl, char *err, size_t errsz)
{
        struct tmpl t = {0};
        int rc = tmpl_compile(&t, tmpl, err, errsz);
        tmpl_free(&t);
        return rc;
}

void keyspec_free(struct keyspec *ks)
{
        if (!ks)
                return;
        for (int i = 0; i < 3; i++)
                tmpl_free(&ks->t[i]);
        free(ks);
}

struct keyspec *keyspec_compile(const char *subject, const char *action, const char *request, char *err, size_t errsz)
{
        const char *src[3] = {subject, action, request};
        struct keyspec *ks = xcalloc(1, sizeof(*ks));

        for (int i = 0; i < 3; i++) {
                char sub[256];
                if (!src[i])
                        continue;
                if (!*src[i]) {
                        seterr(err, errsz, "key %s is empty", part_names[i]);
                        goto error;
                }
                if (tmpl_compile(&ks->t[i], src[i], sub, sizeof(sub))) {
                        seterr(err, errsz, "key %s: %s", part_names[i], sub);
                        goto error;
                }
                for (size_t j = 0; j < ks->t[i].cnt; j++)
                        if (ks->t[i].parts[j].kind == PART_JSON)
                                ks->needs_json = 1;
        }
        if (!subject) {
                seterr(err, errsz, "key subject is required");
                goto error;
        }
        ks->has_request = request != NULL;
        return ks;
error:
        keyspec_free(ks);
        return NULL;
}

int keyspec_needs_json(const struct keyspec *ks) { return ks->needs_json; }

int keyspec_reads_amqp(const struct keyspec *ks)
{
        for (int i = 0; i < 3; i++)
                for (size_t j = 0; j < ks->t[i].cnt; j++)
                        if (ks->t[i].parts[j].kind == PART_AMQP)
                                return 1;
        return 0;
}

/* Rendering into a strbuf, in the style of the steps that can fail (this
 * one cannot: out of memory ends the process). */
static int buf_add(struct strbuf *b, const void *data, size_t n)
{
        strbuf_add(b, data, n);
        return 0;
}

/* Values from the message are percent-encoded for '/' and '%', so the '/'
 * between subject, action and request can never be forged by a value:
 * subject "a/PAY/b" + request "c" and subject "a" + request "b/PAY/c"
 * stay two different keys. */
static int buf_add_value(struct strbuf *b, const char *s, size_t n, int raw)
{
        size_t start = 0;
        if (raw)
                return buf_add(b, s, n);
        for (size_t i = 0; i < n; i++) {
                if (s[i] != '/' && s[i] != '%')
                        continue;
                if (buf_add(b, s + start, i - start) || buf_add(b, s[i] == '/' ? "%2F" : "%25", 3))
                        return -1;
                start = i + 1;
        }
        return buf_add(b, s + start, n - start);
}

static int append_json(const struct part *p, json_t *root, struct strbuf *b, int raw, char *err, size_t errsz)
{
        json_t *v = root;
        char num[64];

        for (size_t i = 0; i < p->step_cnt; i++) {
                const struct path_step *st = &p->steps[i];
                if (st->member) {
                        if (!json_is_object(v)) {
                                seterr(err, errsz, "json field '%s': '%s' is not inside an object", p->text,
                                       st->member);
                                return -1;
                        }
                        v = json_object_get(v, st->member);
                } else {
                        if (!json_is_array(v)) {
                                seterr(err, errsz, "json field '%s': [%zu] applied to a non-array", p->text, st->index);
                                return -1;
                        }
                        v = json_array_get(v, st->index);
                }
                if (!v) {
                        seterr(err, errsz, "json field '%s' is missing", p->text);
                        return -1;
                }
        }
        switch (json_typeof(v)) {
        case JSON_STRING:
                if (json_string_length(v) == 0 && !raw) {
                        seterr(err, errsz, "json field '%s' is empty", p->text);
                        return -1;
                }
                if (memchr(json_string_value(v), '\0', json_string_length(v))) {
                        seterr(err, errsz, "json field '%s' contains a NUL character", p->text);
                        return -1;
                }
                return buf_add_value(b, json_string_value(v), json_string_length(v), raw);
        case JSON_INTEGER:
                snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                return buf_add(b, num, strlen(num));
        case JSON_REAL:
                /* The parser keeps a double, not the numeral: 9007199254740993.0
                 * and 9007199254740992.0 would become one key. */
                seterr(err, errsz,
                       "json field '%s' is a number with a fraction or an exponent: a key must not "
                       "depend on floating-point rounding (two different numbers can round to one "
                       "key); send it as a string or as an integer",
                       p->text);
                return -1;
        case JSON_TRUE: return buf_add(b, "true", 4);
        case JSON_FALSE: return buf_add(b, "false", 5);
        case JSON_NULL: seterr(err, errsz, "json field '%s' is null", p->text); return -1;
        default: seterr(err, errsz, "json field '%s' is an object or array, not a scalar", p->text); return -1;
        }
}

static int append_bytes(const char *what, const void *data, size_t len, struct strbuf *b, int raw, char *err,
                        size_t errsz)
{
        if (!data || (len == 0 && !raw)) {
                seterr(err, errsz, "%s is missing or empty", what);
                return -1;
        }
        if (!utf8_text_ok(data, len)) {
                seterr(err, errsz, "%s is not valid UTF-8 text", what);
                return -1;
        }
        return buf_add_value(b, data, len, raw);
}

static int tmpl_render(const struct tmpl *t, const struct record *in, json_t *root, struct strbuf *b, int raw,
                       char *err, size_t errsz)
{
        for (size_t i = 0; i < t->cnt; i++) {
                const struct part *p = &t->parts[i];
                char what[300];
                int rc = 0;
                switch (p->kind) {
                case PART_LITERAL: rc = buf_add(b, p->text, strlen(p->text)); break;
                case PART_JSON: rc = append_json(p, root, b, raw, err, errsz); break;
                case PART_KEY: rc = append_bytes("Kafka message key", in->key, in->key_len, b, raw, err, errsz); break;
                case PART_AMQP: {
                        const struct dedupd_header *h = NULL;
                        for (size_t k = 0; k < in->prop_cnt; k++)
                                if (!strcmp(in->props[k].name, p->text))
                                        h = &in->props[k];
                        snprintf(what, sizeof(what), "AMQP property %s", p->text);
                        rc = append_bytes(what, h ? h->value : NULL, h ? h->value_len : 0, b, raw, err, errsz);
                        break;
                }
                case PART_HEADER: {
                        const struct dedupd_header *h = NULL;
                        /* The last header of a name wins, as in Kafka's lastHeader(). */
                        for (size_t k = 0; k < in->header_cnt; k++)
                                if (!strcmp(in->headers[k].name, p->text))
                                        h = &in->headers[k];
                        snprintf(what, sizeof(what), "header '%s'", p->text);
                        rc = append_bytes(what, h ? h->value : NULL, h ? h->value_len : 0, b, raw, err, errsz);
                        break;
                }
                }
                if (rc)
                        return -1;
        }
        return 0;
}

json_t *keyspec_load_json(const struct record *in, char *err, size_t errsz)
{
        json_error_t jerr;
        json_t *root;
        if (!in->value || in->value_len == 0) {
                seterr(err, errsz, "payload is empty (tombstone?), no JSON to read the key from");
                return NULL;
        }
        /* A member given twice is read differently by different parsers
         * (first or last wins): two readings, two keys. */
        root = json_loadb(in->value, in->value_len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
        if (!root && json_error_code(&jerr) == json_error_numeric_overflow)
                seterr(err, errsz,
                       "payload has an integer beyond 64 bits at byte %d: it cannot be read exactly; send such "
                       "numbers as strings",
                       jerr.position);
        else if (!root && json_error_code(&jerr) == json_error_duplicate_key)
                seterr(err, errsz, "payload is ambiguous: %s at byte %d (parsers disagree on which value counts)",
                       jerr.text, jerr.position);
        else if (!root)
                seterr(err, errsz, "payload is not valid JSON: %s at byte %d", jerr.text, jerr.position);
        return root;
}

void keyspec_store_form(const char *text, size_t len, char *out, size_t outsz)
{
        /* A short key spelled like a hashed one is hashed as well: otherwise
         * a value "sha256:<hex>" would forge the key of the long message whose
         * digest it is (found by fuzz_derive_diff). */
        if (len > KEYSPEC_MAX_KEY_LEN || len >= outsz || !strncmp(text, KEYSPEC_HASH_PREFIX, 7)) {
                unsigned char md[SHA256_DIGEST_LENGTH];
                SHA256((const unsigned char *)text, len, md);
                memcpy(out, KEYSPEC_HASH_PREFIX, 7);
                hex_encode(md, SHA256_DIGEST_LENGTH, out + 7);
        } else {
                memcpy(out, text, len + 1);
        }
}

int keyspec_derive_text(const struct keyspec *ks, const struct record *in, size_t max_text, char *out, size_t outsz,
                        char **text, char *err, size_t errsz)
{
        json_t *root = NULL;
        struct strbuf b = {0};
        int rc = -1;

        if (errsz)
                err[0] = '\0';
        if (text)
                *text = NULL;
        if (outsz < 7 + 2 * SHA256_DIGEST_LENGTH + 1) {
                seterr(err, errsz, "key buffer too small");
                return -1;
        }
        if (ks->needs_json && !(root = keyspec_load_json(in, err, errsz)))
                return -1;
        for (int i = 0; i < 3; i++) {
                if (i == 2 && !ks->has_request)
                        break;
                if (i == 1 && ks->t[1].cnt == 0)
                        continue; /* no action configured */
                if (i > 0 && buf_add(&b, "/", 1))
                        goto out;
                size_t before = b.len;
                if (tmpl_render(&ks->t[i], in, root, &b, 0, err, errsz))
                        goto out;
                if (b.len == before) {
                        seterr(err, errsz, "key %s is empty", part_names[i]);
                        goto out;
                }
        }
        if (b.len > max_text) {
                seterr(err, errsz, "key of %zu bytes exceeds limits.key_bytes (%zu)", b.len, max_text);
                goto out;
        }
        keyspec_store_form(b.p, b.len, out, outsz);
        if (text && strcmp(out, b.p)) {
                *text = b.p; /* hashed: the text is kept beside it */
                b.p = NULL;
        }
        rc = 0;
out:
        free(b.p);
        json_decref(root);
        return rc;
}

int keyspec_derive(const struct keyspec *ks, const struct record *in, char *out, size_t outsz, char *err, size_t errsz)
{
        return keyspec_derive_text(ks, in, SIZE_MAX, out, outsz, NULL, err, errsz);
}

/* ---- one template on its own ------------------------------------------------- */

struct keytmpl {
        struct tmpl t;
        int needs_json;
};

struct keytmpl *keytmpl_compile(const char *src, char *err, size_t errsz)
{
        struct keytmpl *kt = xcalloc(1, sizeof(*kt));
        if (tmpl_compile(&kt->t, src, err, errsz)) {
                keytmpl_free(kt);
                return NULL;
        }
        for (size_t j = 0; j < kt->t.cnt; j++)
                if (kt->t.parts[j].kind == PART_JSON)
                        kt->needs_json = 1;
        return kt;
}

void keytmpl_free(struct keytmpl *kt)
{
        if (!kt)
                return;
        tmpl_free(&kt->t);
        free(kt);
}

int keytmpl_needs_json(const struct keytmpl *kt) { return kt->needs_json; }

char *keytmpl_render(const struct keytmpl *kt, const struct record *in, json_t *root, char *err, size_t errsz)
{
        struct strbuf b = {0};
        if (tmpl_render(&kt->t, in, root, &b, 1, err, errsz) || buf_add(&b, "", 0)) {
                free(b.p);
                return NULL;
        }
        return b.p;
}

void keyspec_fingerprint(const json_t *paths, const void *value, size_t len, char out[65])
{
        unsigned char md[SHA256_DIGEST_LENGTH];
        json_error_t jerr;
        json_t *root = value && len ? json_loadb(value, len, JSON_DECODE_ANY, &jerr) : NULL;
        EVP_MD_CTX *sha = EVP_MD_CTX_new();
        size_t i;
        json_t *p;

        if (!sha) {
                memset(out, '0', 64);
                out[64] = '\0';
                json_decref(root);
                return;
        }
        EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
        if (!root) {
                EVP_DigestUpdate(sha, value ? value : "", len);
        } else {
                json_array_foreach(paths, i, p)
                {
                        struct part part = {0};
                        char err[128];
                        json_t *v = root;
                        if (i > 0)
                                EVP_DigestUpdate(sha, "\x1f", 1);
                        if (json_is_string(p) && !path_parse(json_string_value(p), &part, err, sizeof(err))) {
                                for (size_t k = 0; k < part.step_cnt && v; k++)
                                        v = part.steps[k].member
                                                    ? (json_is_object(v) ? json_object_get(v, part.steps[k].member)
                                                                         : NULL)
                                                    : json_array_get(v, part.steps[k].index);
                        } else {
                                v = NULL;
                        }
                        for (size_t k = 0; k < part.step_cnt; k++)
                                free(part.steps[k].member);
                        free(part.steps);
                        char *enc = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS) : NULL;
                        EVP_DigestUpdate(sha, enc ? enc : "null", enc ? strlen(enc) : 4);
                        free(enc);
                }
                json_decref(root);
        }
        EVP_DigestFinal_ex(sha, md, NULL);
        EVP_MD_CTX_free(sha);
        hex_encode(md, SHA256_DIGEST_LENGTH, out);
}
