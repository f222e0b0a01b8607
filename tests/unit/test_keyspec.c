/* test_keyspec: the business idempotency key — which messages count as the
 * same operation, and why a message gets no key at all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "base/json_depth.h"
#include "base/keyspec.h"
#include "unit.h"

#define HDRS(a) (a), (sizeof(a) / sizeof((a)[0]))

static const struct dedupd_header h_req[] = {{"request-id", "r-1", 3}};
static const struct dedupd_header h_req_twice[] = {
        {"request-id", "r-1", 3}, {"trace", "t-9", 3}, {"request-id", "r-2", 3}};
static const struct dedupd_header h_req_case[] = {{"Request-Id", "r-1", 3}};
#define UTF8_ID "z\xc3\xbcrich-\xe2\x82\xac-\xf0\x9f\x98\x80" /* zürich-€-😀 */
static const struct dedupd_header h_req_utf8[] = {{"request-id", UTF8_ID, sizeof(UTF8_ID) - 1}};
static const struct dedupd_header h_req_null[] = {{"request-id", NULL, 0}};
static const struct dedupd_header h_req_empty[] = {{"request-id", "", 0}};
static const struct dedupd_header h_req_latin1[] = {{"request-id", "caf\xe9", 4}};
static const struct dedupd_header h_req_ff[] = {{"request-id", "\xff\xfe", 2}};
static const struct dedupd_header h_req_overlong[] = {{"request-id", "\xc0\xaf", 2}};
static const struct dedupd_header h_req_surrogate[] = {{"request-id", "\xed\xa0\x80", 3}};
static const struct dedupd_header h_req_cut[] = {{"request-id", "ab\xe2\x82", 4}};
static const struct dedupd_header h_req_nul[] = {{"request-id", "a\0b", 3}};
static const struct dedupd_header h_mix[] = {{"tenant", "acme", 4}};
static const struct dedupd_header h_other[] = {{"trace", "t-9", 3}};

struct derive_case {
        const char *name;
        const char *subject, *action, *request;
        const char *payload; /* NULL: tombstone */
        size_t payload_len;  /* 0: strlen(payload) */
        const char *key;     /* Kafka message key, NULL: none */
        size_t key_len;      /* 0: strlen(key) */
        const struct dedupd_header *headers;
        size_t header_cnt;
        const char *want; /* the key; NULL when derivation must fail */
        const char *err;  /* phrase of the failure */
};

static const struct derive_case derive_cases[] = {
        /* a value cannot forge the separator: these two must stay different keys */
        {.name = "derive: '/' in a value is encoded",
         .subject = "{json:s}",
         .action = "PAY",
         .request = "{json:r}",
         .payload = "{\"s\": \"a/PAY/b\", \"r\": \"c\"}",
         .want = "a%2FPAY%2Fb/PAY/c"},
        {.name = "derive: '/' in another part is encoded too",
         .subject = "{json:s}",
         .action = "PAY",
         .request = "{json:r}",
         .payload = "{\"s\": \"a\", \"r\": \"b/PAY/c\"}",
         .want = "a/PAY/b%2FPAY%2Fc"},
        {.name = "derive: '%' in a value is encoded",
         .subject = "{key}",
         .payload = "x",
         .key = "50%/off",
         .want = "50%25%2Foff"},
        {.name = "derive: literals keep their '/'",
         .subject = "shop/{json:id}",
         .payload = "{\"id\": \"7\"}",
         .want = "shop/7"},
        /* where the parts come from */
        {.name = "derive: nested json field",
         .subject = "{json:order.customer.id}",
         .action = "PAY",
         .payload = "{\"order\": {\"customer\": {\"id\": \"c-42\"}, \"total\": 10}}",
         .want = "c-42/PAY"},
        {.name = "derive: array index items[1].sku",
         .subject = "{json:items[1].sku}",
         .action = "SHIP",
         .payload = "{\"items\": [{\"sku\": \"A-1\"}, {\"sku\": \"B-2\"}]}",
         .want = "B-2/SHIP"},
        {.name = "derive: index into a top-level array",
         .subject = "{json:[0]}",
         .payload = "[\"first\", \"second\"]",
         .want = "first"},
        {.name = "derive: nested array indexes",
         .subject = "{json:m[1][0]}",
         .payload = "{\"m\": [[1], [22, 33]]}",
         .want = "22"},
        {.name = "derive: integer field",
         .subject = "{json:id}",
         .action = "PAY",
         .payload = "{\"id\": 12345}",
         .want = "12345/PAY"},
        {.name = "derive: negative integer field", .subject = "{json:id}", .payload = "{\"id\": -7}", .want = "-7"},
        {.name = "derive: largest int64 field is exact",
         .subject = "{json:id}",
         .payload = "{\"id\": 9223372036854775807}",
         .want = "9223372036854775807"},
        {.name = "derive: boolean true field",
         .subject = "{json:id}",
         .action = "{json:flag}",
         .payload = "{\"id\": 1, \"flag\": true}",
         .want = "1/true"},
        {.name = "derive: boolean false field",
         .subject = "{json:id}",
         .action = "{json:flag}",
         .payload = "{\"id\": 1, \"flag\": false}",
         .want = "1/false"},
        /* exact keys: a key never depends on floating-point rounding */
        {.name = "exact: a number with a fraction is refused, not rounded",
         .subject = "{json:v}",
         .payload = "{\"v\": 1.5}",
         .err = "json field 'v' is a number with a fraction or an exponent"},
        {.name = "exact: 9007199254740993.0 is refused (it would round to ...992)",
         .subject = "{json:order_id}",
         .action = "PAY",
         .payload = "{\"order_id\": 9007199254740993.0}",
         .err = "a key must not depend on floating-point rounding"},
        {.name = "exact: 0.100000000000000005 is refused (it would round to 0.1)",
         .subject = "{json:order_id}",
         .payload = "{\"order_id\": 0.100000000000000005}",
         .err = "send it as a string or as an integer"},
        {.name = "exact: 1.0 is refused (it does not merge with 1)",
         .subject = "{json:order_id}",
         .payload = "{\"order_id\": 1.0}",
         .err = "a fraction or an exponent"},
        {.name = "exact: an exponent is refused (1e3)",
         .subject = "{json:order_id}",
         .payload = "{\"order_id\": 1e3}",
         .err = "a fraction or an exponent"},
        {.name = "exact: 9007199254740993 as an integer is exact",
         .subject = "{json:order_id}",
         .action = "PAY",
         .payload = "{\"order_id\": 9007199254740993}",
         .want = "9007199254740993/PAY"},
        {.name = "exact: 9007199254740992 as an integer is another key",
         .subject = "{json:order_id}",
         .action = "PAY",
         .payload = "{\"order_id\": 9007199254740992}",
         .want = "9007199254740992/PAY"},
        {.name = "exact: smallest int64 is exact",
         .subject = "{json:id}",
         .payload = "{\"id\": -9223372036854775808}",
         .want = "-9223372036854775808"},
        {.name = "exact: an integer beyond 64 bits is refused with the reason",
         .subject = "{json:id}",
         .payload = "{\"id\": 18446744073709551616}",
         .err = "payload has an integer beyond 64 bits"},
        {.name = "exact: beyond 64 bits even in another field (the payload cannot be read exactly)",
         .subject = "{json:id}",
         .payload = "{\"id\": \"7\", \"trace\": 99999999999999999999}",
         .err = "payload has an integer beyond 64 bits"},
        {.name = "exact: -0 is the integer 0", .subject = "{json:id}", .payload = "{\"id\": -0}", .want = "0"},
        /* intended merges: the same text from the same id spelled two ways */
        {.name = "canonical: the integer 424242 is the text 424242",
         .subject = "{json:id}",
         .payload = "{\"id\": 424242}",
         .want = "424242"},
        {.name = "canonical: the string \"424242\" is the same key",
         .subject = "{json:id}",
         .payload = "{\"id\": \"424242\"}",
         .want = "424242"},
        {.name = "canonical: the string \"true\" is the key true, like the boolean",
         .subject = "{json:id}",
         .payload = "{\"id\": \"true\"}",
         .want = "true"},
        {.name = "canonical: JSON escapes are decoded (\\u0041 is A)",
         .subject = "{json:id}",
         .payload = "{\"id\": \"\\u0041-1\"}",
         .want = "A-1"},
        {.name = "canonical: NFC e-acute stays its bytes",
         .subject = "{json:id}",
         .payload = "{\"id\": \"caf\xc3\xa9\"}",
         .want = "caf\xc3\xa9"},
        {.name = "canonical: NFD e + combining acute is another key (no normalisation)",
         .subject = "{json:id}",
         .payload = "{\"id\": \"cafe\xcc\x81\"}",
         .want = "cafe\xcc\x81"},
        {.name = "exact: a member given twice is refused (parsers disagree which counts)",
         .subject = "{json:order_id}",
         .payload = "{\"order_id\": \"a\", \"order_id\": \"b\"}",
         .err = "payload is ambiguous: duplicate object key"},
        {.name = "derive: unicode escape in a json string",
         .subject = "{json:id}",
         .payload = "{\"id\": \"caf\\u00e9\"}",
         .want = "caf\xc3\xa9"},
        {.name = "derive: header source",
         .subject = "{header:request-id}",
         .action = "PAY",
         .payload = "not json, not needed",
         .headers = HDRS(h_req),
         .want = "r-1/PAY"},
        {.name = "derive: the last header of a name wins",
         .subject = "{json:id}",
         .action = "PAY",
         .request = "{header:request-id}",
         .payload = "{\"id\": \"o-1\"}",
         .headers = HDRS(h_req_twice),
         .want = "o-1/PAY/r-2"},
        {.name = "derive: multi-byte UTF-8 header",
         .subject = "{header:request-id}",
         .headers = HDRS(h_req_utf8),
         .want = UTF8_ID},
        {.name = "derive: Kafka key source",
         .subject = "{key}",
         .action = "PAY",
         .key = "user-7",
         .want = "user-7/PAY"},
        {.name = "derive: literal and source mixed",
         .subject = "user-{key}",
         .action = "PAY",
         .key = "7",
         .want = "user-7/PAY"},
        {.name = "derive: several sources in one part",
         .subject = "{header:tenant}:{json:a.b}:{key}!",
         .action = "X",
         .payload = "{\"a\": {\"b\": 5}}",
         .key = "k",
         .headers = HDRS(h_mix),
         .want = "acme:5:k!/X"},
        {.name = "derive: subject only", .subject = "{json:id}", .payload = "{\"id\": \"o-1\"}", .want = "o-1"},
        {.name = "derive: subject and action",
         .subject = "{json:id}",
         .action = "PAY",
         .payload = "{\"id\": \"o-1\"}",
         .want = "o-1/PAY"},
        {.name = "derive: subject, action and request",
         .subject = "{json:id}",
         .action = "PAY",
         .request = "{header:request-id}",
         .payload = "{\"id\": \"o-1\"}",
         .headers = HDRS(h_req),
         .want = "o-1/PAY/r-1"},
        {.name = "derive: literals only need no payload",
         .subject = "GLOBAL",
         .action = "RESET",
         .want = "GLOBAL/RESET"},
        {.name = "derive: a key-only template ignores a payload that is not JSON",
         .subject = "{key}",
         .payload = "\x01\x02 binary",
         .key = "k-1",
         .want = "k-1"},

        /* why a message gets no key */
        {.name = "derive error: missing field",
         .subject = "{json:id}",
         .payload = "{\"other\": 1}",
         .err = "json field 'id' is missing"},
        {.name = "derive error: missing nested field",
         .subject = "{json:order.id}",
         .payload = "{\"order\": {}}",
         .err = "json field 'order.id' is missing"},
        {.name = "derive error: empty string field",
         .subject = "{json:id}",
         .payload = "{\"id\": \"\"}",
         .err = "json field 'id' is empty"},
        {.name = "derive error: null field",
         .subject = "{json:id}",
         .payload = "{\"id\": null}",
         .err = "json field 'id' is null"},
        {.name = "derive error: object field",
         .subject = "{json:id}",
         .payload = "{\"id\": {\"a\": 1}}",
         .err = "json field 'id' is an object or array, not a scalar"},
        {.name = "derive error: array field",
         .subject = "{json:id}",
         .payload = "{\"id\": [1]}",
         .err = "json field 'id' is an object or array, not a scalar"},
        {.name = "derive error: member of a non-object",
         .subject = "{json:order.id}",
         .payload = "{\"order\": \"o-1\"}",
         .err = "json field 'order.id': 'id' is not inside an object"},
        {.name = "derive error: member of a top-level string",
         .subject = "{json:id}",
         .payload = "\"o-1\"",
         .err = "json field 'id': 'id' is not inside an object"},
        {.name = "derive error: index into a non-array",
         .subject = "{json:items[0]}",
         .payload = "{\"items\": {\"0\": 1}}",
         .err = "json field 'items[0]': [0] applied to a non-array"},
        {.name = "derive error: index out of range",
         .subject = "{json:items[5].sku}",
         .payload = "{\"items\": [{\"sku\": \"A\"}]}",
         .err = "json field 'items[5].sku' is missing"},
        {.name = "derive error: non-JSON payload",
         .subject = "{json:id}",
         .payload = "order 42 paid",
         .err = "payload is not valid JSON"},
        {.name = "derive error: truncated JSON",
         .subject = "{json:id}",
         .payload = "{\"id\": ",
         .err = "payload is not valid JSON"},
        {.name = "derive error: integer beyond int64 is refused, not rounded",
         .subject = "{json:id}",
         .payload = "{\"id\": 12345678901234567890}",
         .err = "payload has an integer beyond 64 bits"},
        {.name = "derive error: JSON with invalid UTF-8",
         .subject = "{json:id}",
         .payload = "{\"id\": \"caf\xe9\"}",
         .err = "payload is not valid JSON"},
        {.name = "derive error: JSON with an escaped NUL",
         .subject = "{json:id}",
         .payload = "{\"id\": \"a\\u0000b\"}",
         .err = "NUL"},
        {.name = "derive error: tombstone when JSON is needed",
         .subject = "{json:id}",
         .action = "PAY",
         .err = "payload is empty (tombstone?), no JSON to read the key from"},
        {.name = "derive error: empty payload when JSON is needed",
         .subject = "{key}",
         .request = "{json:r}",
         .payload = "",
         .key = "k",
         .err = "payload is empty (tombstone?)"},
        {.name = "derive error: missing header",
         .subject = "{json:id}",
         .request = "{header:request-id}",
         .payload = "{\"id\": 1}",
         .headers = HDRS(h_other),
         .err = "header 'request-id' is missing or empty"},
        {.name = "derive error: no headers at all",
         .subject = "{header:request-id}",
         .err = "header 'request-id' is missing or empty"},
        {.name = "derive error: header names are case-sensitive",
         .subject = "{header:request-id}",
         .headers = HDRS(h_req_case),
         .err = "header 'request-id' is missing or empty"},
        {.name = "derive error: null header",
         .subject = "{header:request-id}",
         .headers = HDRS(h_req_null),
         .err = "header 'request-id' is missing or empty"},
        {.name = "derive error: empty header",
         .subject = "{header:request-id}",
         .headers = HDRS(h_req_empty),
         .err = "header 'request-id' is missing or empty"},
        {.name = "derive error: latin-1 header",
         .subject = "{header:request-id}",
         .headers = HDRS(h_req_latin1),
         .err = "header 'request-id' is not valid UTF-8 text"},
        {.name = "derive error: invalid UTF-8 header",
         .subject = "{header:request-id}",
         .headers = HDRS(h_req_ff),
         .err = "header 'request-id' is not valid UTF-8 text"},
        {.name = "derive error: overlong UTF-8 header",
         .subject = "{header:request-id}",
         .headers = HDRS(h_req_overlong),
         .err = "header 'request-id' is not valid UTF-8 text"},
        {.name = "derive error: UTF-16 surrogate in a header",
         .subject = "{header:request-id}",
         .headers = HDRS(h_req_surrogate),
         .err = "header 'request-id' is not valid UTF-8 text"},
        {.name = "derive error: truncated UTF-8 sequence in a header",
         .subject = "{header:request-id}",
         .headers = HDRS(h_req_cut),
         .err = "header 'request-id' is not valid UTF-8 text"},
        {.name = "derive error: NUL byte in a header",
         .subject = "{header:request-id}",
         .headers = HDRS(h_req_nul),
         .err = "header 'request-id' is not valid UTF-8 text"},
        {.name = "derive error: no Kafka key",
         .subject = "{key}",
         .action = "PAY",
         .err = "Kafka message key is missing or empty"},
        {.name = "derive error: binary Kafka key",
         .subject = "{key}",
         .key = "\0\0\0\x01",
         .key_len = 4,
         .err = "Kafka message key is not valid UTF-8 text"},
};

static int derive(const struct keyspec *ks, const char *payload, size_t payload_len, const char *key, size_t key_len,
                  const struct dedupd_header *hdrs, size_t hcnt, char *out, char *err, size_t errsz)
{
        struct record in = {.value = payload,
                            .value_len = payload && !payload_len ? strlen(payload) : payload_len,
                            .key = key,
                            .key_len = key && !key_len ? strlen(key) : key_len,
                            .headers = hdrs,
                            .header_cnt = hcnt};
        return keyspec_derive(ks, &in, out, KEYSPEC_MAX_KEY_LEN + 1, err, errsz);
}

static struct keyspec *compile_ok(const char *subject, const char *action, const char *request)
{
        char err[512] = "";
        struct keyspec *ks = keyspec_compile(subject, action, request, err, sizeof(err));
        if (!ks)
                fail_msg("keyspec_compile(%s, %s, %s): %s", subject, action ? action : "NULL",
                         request ? request : "NULL", err);
        return ks;
}

/* {amqp:NAME} reads the broker's properties, never a header of that name. */
static void amqp_properties(void **state)
{
        (void)state;
        static const struct dedupd_header props[] = {{"message_id", "m-1", 3}, {"correlation_id", "c/9", 3}};
        static const struct dedupd_header hdrs[] = {{"message_id", "from-a-header", 13}};
        char out[KEYSPEC_MAX_KEY_LEN + 1] = "", err[512] = "";
        struct keyspec *ks = compile_ok("{amqp:message_id}", "PAY", "{amqp:correlation_id}");
        struct record in = {
                .value = "x", .value_len = 1, .headers = hdrs, .header_cnt = 1, .props = props, .prop_cnt = 2};
        assert_true(keyspec_reads_amqp(ks));
        assert_int_equal(keyspec_derive(ks, &in, out, sizeof(out), err, sizeof(err)), 0);
        assert_string_equal(out, "m-1/PAY/c%2F9");
        in.prop_cnt = 0;
        assert_int_equal(keyspec_derive(ks, &in, out, sizeof(out), err, sizeof(err)), -1);
        assert_contains(err, "AMQP property message_id is missing or empty");
        keyspec_free(ks);
        ks = compile_ok("{json:id}", "PAY", NULL);
        assert_false(keyspec_reads_amqp(ks));
        keyspec_free(ks);
        assert_int_equal(keyspec_template_check("{amqp:priority}", err, sizeof(err)), -1);
        assert_contains(err, "unknown AMQP property '{amqp:priority}'");
}

static void derive_case(void **state)
{
        const struct derive_case *c = *state;
        char out[KEYSPEC_MAX_KEY_LEN + 1] = "", err[512] = "";
        struct keyspec *ks = compile_ok(c->subject, c->action, c->request);
        int rc = derive(ks, c->payload, c->payload_len, c->key, c->key_len, c->headers, c->header_cnt, out, err,
                        sizeof(err));
        keyspec_free(ks);

        if (c->want) {
                if (rc)
                        fail_msg("expected key \"%s\", got error: %s", c->want, err);
                assert_string_equal(out, c->want);
        } else {
                if (!rc)
                        fail_msg("expected an error containing \"%s\", got key \"%s\"", c->err, out);
                assert_contains(err, c->err);
        }
}

static void needs_json(void **state)
{
        struct keyspec *ks = compile_ok("{key}", "PAY", NULL);
        assert_false(keyspec_needs_json(ks));
        keyspec_free(ks);
        ks = compile_ok("{header:h}", "PAY", "{key}");
        assert_false(keyspec_needs_json(ks));
        keyspec_free(ks);
        ks = compile_ok("{key}", "PAY", "x-{json:r}");
        assert_true(keyspec_needs_json(ks));
        keyspec_free(ks);
        ks = compile_ok("{json:id}", NULL, NULL);
        assert_true(keyspec_needs_json(ks));
        keyspec_free(ks);
}

/* JSON nested far deeper than any real payload: an error, not a crash. */
static void deeply_nested_json(void **state)
{
        enum { DEPTH = 5000 };
        char *open = malloc(DEPTH + 1), *balanced = malloc(2 * DEPTH + 1);
        char out[KEYSPEC_MAX_KEY_LEN + 1], err[512] = "";
        struct keyspec *ks = compile_ok("{json:id}", "PAY", NULL);

        assert_non_null(open);
        assert_non_null(balanced);
        memset(open, '[', DEPTH);
        open[DEPTH] = '\0';
        memset(balanced, '[', DEPTH);
        memset(balanced + DEPTH, ']', DEPTH);
        balanced[2 * DEPTH] = '\0';

        assert_int_equal(derive(ks, open, 0, NULL, 0, NULL, 0, out, err, sizeof(err)), -1);
        assert_contains(err, "payload is not valid JSON");
        err[0] = '\0';
        assert_int_equal(derive(ks, balanced, 0, NULL, 0, NULL, 0, out, err, sizeof(err)), -1);
        assert_contains(err, "payload is not valid JSON");
        keyspec_free(ks);
        free(open);
        free(balanced);
}

static void sha256_hex(const char *data, size_t len, char *hex)
{
        unsigned char md[SHA256_DIGEST_LENGTH];
        SHA256((const unsigned char *)data, len, md);
        for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
                sprintf(hex + 2 * i, "%02x", md[i]);
}

static void assert_hashed_key(const char *key)
{
        assert_int_equal(strlen(key), 7 + 64);
        assert_prefix(key, "sha256:");
        assert_int_equal(strspn(key + 7, "0123456789abcdef"), 64);
}

/* Builds {"id": "<n times c>"} */
static char *payload_with_id(size_t n, char c)
{
        char *p = malloc(n + 16);
        assert_non_null(p);
        memcpy(p, "{\"id\": \"", 8);
        memset(p + 8, c, n);
        memcpy(p + 8 + n, "\"}", 3);
        return p;
}

static void long_key_is_hashed(void **state)
{
        char out[KEYSPEC_MAX_KEY_LEN + 1], again[KEYSPEC_MAX_KEY_LEN + 1], other[KEYSPEC_MAX_KEY_LEN + 1], err[512];
        char full[700], hex[65], want[80];
        struct keyspec *ks = compile_ok("{json:id}", "PAY", NULL);
        struct keyspec *ks2 = compile_ok("{json:id}", "PAY", NULL);
        char *p = payload_with_id(600, 'a');

        if (derive(ks, p, 0, NULL, 0, NULL, 0, out, err, sizeof(err)))
                fail_msg("%s", err);
        assert_hashed_key(out);

        /* it is the SHA-256 of the full key subject/action */
        memset(full, 'a', 600);
        memcpy(full + 600, "/PAY", 5);
        sha256_hex(full, strlen(full), hex);
        snprintf(want, sizeof(want), "sha256:%s", hex);
        assert_string_equal(out, want);

        /* stable: same message, same key, whoever compiles the template */
        if (derive(ks2, p, 0, NULL, 0, NULL, 0, again, err, sizeof(err)))
                fail_msg("%s", err);
        assert_string_equal(again, out);

        /* a different last byte is a different key */
        p[8 + 599] = 'b';
        if (derive(ks, p, 0, NULL, 0, NULL, 0, other, err, sizeof(err)))
                fail_msg("%s", err);
        assert_hashed_key(other);
        assert_string_not_equal(other, out);

        free(p);
        keyspec_free(ks);
        keyspec_free(ks2);
}

static void key_length_boundary(void **state)
{
        char out[KEYSPEC_MAX_KEY_LEN + 1], err[512];
        struct keyspec *ks = compile_ok("{json:id}", "PAY", NULL);
        /* "/PAY" is 4 bytes: an id of 508 makes a key of exactly 512 */
        char *p = payload_with_id(KEYSPEC_MAX_KEY_LEN - 4, 'x');

        if (derive(ks, p, 0, NULL, 0, NULL, 0, out, err, sizeof(err)))
                fail_msg("%s", err);
        assert_int_equal(strlen(out), KEYSPEC_MAX_KEY_LEN);
        assert_int_equal(strspn(out, "x"), KEYSPEC_MAX_KEY_LEN - 4);
        assert_string_equal(out + KEYSPEC_MAX_KEY_LEN - 4, "/PAY");
        free(p);

        p = payload_with_id(KEYSPEC_MAX_KEY_LEN - 3, 'x');
        if (derive(ks, p, 0, NULL, 0, NULL, 0, out, err, sizeof(err)))
                fail_msg("%s", err);
        assert_hashed_key(out);
        free(p);
        keyspec_free(ks);
}

static void long_header_is_hashed(void **state)
{
        char big[2000], out[KEYSPEC_MAX_KEY_LEN + 1], err[512];
        struct dedupd_header h = {"request-id", big, sizeof(big)};
        struct keyspec *ks = compile_ok("{header:request-id}", NULL, NULL);

        memset(big, 'r', sizeof(big));
        if (derive(ks, NULL, 0, NULL, 0, &h, 1, out, err, sizeof(err)))
                fail_msg("%s", err);
        assert_hashed_key(out);
        keyspec_free(ks);
}

/* ---- templates ---------------------------------------------------------------- */

struct tmpl_case {
        const char *name;
        const char *tmpl;
        const char *err;  /* NULL: valid */
        const char *err2; /* another phrase of the message */
};

#define REFUSED(src)                                                                                                   \
        {                                                                                                              \
                "template refused: " src, src, src " is refused", "deduplicates nothing"                               \
        }

static const struct tmpl_case tmpl_cases[] = {
        {"template ok: literal", "PAY", NULL, NULL},
        {"template ok: json field", "{json:order_id}", NULL, NULL},
        {"template ok: json path", "{json:a.b[0].c}", NULL, NULL},
        {"template ok: json root index", "{json:[0]}", NULL, NULL},
        {"template ok: header", "{header:request-id}", NULL, NULL},
        {"template ok: key", "{key}", NULL, NULL},
        {"template ok: literal and key", "user-{key}", NULL, NULL},
        {"template ok: everything", "{json:a}-{header:b}-{key}/x", NULL, NULL},
        {"template ok: stray closing brace is literal", "a}b", NULL, NULL},
        REFUSED("{offset}"),
        REFUSED("{partition}"),
        REFUSED("{timestamp}"),
        REFUSED("{uuid}"),
        REFUSED("{time}"),
        REFUSED("{now}"),
        REFUSED("{random}"),
        REFUSED("{topic}"),
        {"template refused inside a mix", "order-{json:id}-{offset}", "{offset} is refused", "use a business field"},
        {"template error: unknown source", "{foo}", "unknown key source '{foo}'",
         "expected {json:PATH}, {header:NAME} or {key}"},
        {"template error: json without colon", "{json}", "unknown key source '{json}'", NULL},
        {"template error: sources are case-sensitive", "{KEY}", "unknown key source '{KEY}'", NULL},
        {"template error: empty braces", "{}", "unknown key source '{}'", NULL},
        {"template error: {json:} empty path", "{json:}", "empty JSON path in {json:}", NULL},
        {"template error: {json:a..b}", "{json:a..b}", "JSON path 'a..b': empty member name", NULL},
        {"template error: {json:a.}", "{json:a.}", "JSON path 'a.': empty member name", NULL},
        {"template error: {json:.a}", "{json:.a}", "JSON path '.a': empty member name", NULL},
        {"template error: {json:a[x]}", "{json:a[x]}", "JSON path 'a[x]': expected an index after '['", NULL},
        {"template error: {json:a[-1]}", "{json:a[-1]}", "expected an index after '['", NULL},
        {"template error: {json:a[1}", "{json:a[1}", "JSON path 'a[1': missing ']'", NULL},
        {"template error: {header:} without a name", "{header:}", "{header:} needs a header name", NULL},
        {"template error: unterminated brace", "{json:order_id", "unterminated '{' in key template", NULL},
        {"template error: unterminated after a literal", "user-{key", "unterminated '{'", NULL},
};

static void tmpl_case(void **state)
{
        const struct tmpl_case *c = *state;
        char err[512] = "";
        int rc = keyspec_template_check(c->tmpl, err, sizeof(err));

        if (!c->err) {
                if (rc)
                        fail_msg("\"%s\" refused: %s", c->tmpl, err);
                return;
        }
        if (!rc)
                fail_msg("\"%s\" accepted, expected \"%s\"", c->tmpl, c->err);
        assert_contains(err, c->err);
        if (c->err2)
                assert_contains(err, c->err2);
}

struct compile_case {
        const char *name;
        const char *subject, *action, *request;
        const char *err;
};

static const struct compile_case compile_cases[] = {
        {"compile error: no subject", NULL, "PAY", NULL, "key subject is required"},
        {"compile error: empty subject", "", "PAY", NULL, "key subject is empty"},
        {"compile error: empty action", "{key}", "", NULL, "key action is empty"},
        {"compile error: empty request", "{key}", "PAY", "", "key request is empty"},
        {"compile error: names the part", "{key}", "{uuid}", NULL, "key action: {uuid} is refused"},
        {"compile error: bad request path", "{key}", "PAY", "{json:}", "key request: empty JSON path in {json:}"},
};

static void compile_case(void **state)
{
        const struct compile_case *c = *state;
        char err[512] = "";
        struct keyspec *ks = keyspec_compile(c->subject, c->action, c->request, err, sizeof(err));
        if (ks) {
                keyspec_free(ks);
                fail_msg("compiled, expected \"%s\"", c->err);
        }
        assert_contains(err, c->err);
}

/* limits.key_bytes bounds the text; a hashed key hands its text back for storage. */
static void key_text_limit_and_text_kept(void **state)
{
        char out[KEYSPEC_MAX_KEY_LEN + 1], err[512] = "";
        struct keyspec *ks = compile_ok("{json:id}", "PAY", NULL);
        char *p = payload_with_id(600, 'b'), *text = NULL;
        struct record in = {.value = p, .value_len = strlen(p)};

        /* 600 + "/PAY": 604 bytes; a limit of 603 refuses it with both numbers */
        assert_int_equal(keyspec_derive_text(ks, &in, 603, out, sizeof(out), &text, err, sizeof(err)), -1);
        assert_string_equal(err, "key of 604 bytes exceeds limits.key_bytes (603)");
        assert_null(text);
        /* 604 passes: stored hashed, the text comes back whole */
        assert_int_equal(keyspec_derive_text(ks, &in, 604, out, sizeof(out), &text, err, sizeof(err)), 0);
        assert_hashed_key(out);
        assert_non_null(text);
        assert_int_equal(strlen(text), 604);
        assert_memory_equal(text + 600, "/PAY", 5);
        free(text);
        /* a short key is stored as it is, with no text beside it */
        in.value = "{\"id\":\"o-1\"}";
        in.value_len = strlen(in.value);
        assert_int_equal(keyspec_derive_text(ks, &in, 604, out, sizeof(out), &text, err, sizeof(err)), 0);
        assert_string_equal(out, "o-1/PAY");
        assert_null(text);
        keyspec_free(ks);
        free(p);
}

/* A short key spelled like a hashed one is hashed, so it cannot forge one. */
static void hashed_spelling_is_hashed(void **state)
{
        char out[KEYSPEC_MAX_KEY_LEN + 1], err[512], want[80], hex[65];
        const char *forged = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
        char payload[128];
        struct keyspec *ks = compile_ok("{json:id}", NULL, NULL);
        snprintf(payload, sizeof(payload), "{\"id\":\"%s\"}", forged);
        assert_int_equal(derive(ks, payload, 0, NULL, 0, NULL, 0, out, err, sizeof(err)), 0);
        sha256_hex(forged, strlen(forged), hex);
        snprintf(want, sizeof(want), "sha256:%s", hex);
        assert_string_equal(out, want);
        keyspec_free(ks);
}

/* limits.json_depth is counted on the bytes: brackets in strings do not count. */
static void json_depth_counted_on_bytes(void **state)
{
        assert_int_equal(json_depth_over("{\"a\":[[1]]}", 11, 3), 0);
        assert_int_equal(json_depth_over("{\"a\":[[[1]]]}", 13, 3), 4);
        assert_int_equal(json_depth_over("{\"a\":\"[[[[[[\"}", 13, 1), 0);
        assert_int_equal(json_depth_over("{\"a\":\"\\\"[[[[\"}", 14, 1), 0);
        assert_int_equal(json_depth_over("[][][][]", 8, 1), 0);
        assert_int_equal(json_depth_over("not json at all", 15, 1), 0);
}

int main(void)
{
        static const struct CMUnitTest tests[] = {
                cmocka_unit_test(needs_json),
                cmocka_unit_test(amqp_properties),
                cmocka_unit_test(deeply_nested_json),
                cmocka_unit_test(long_key_is_hashed),
                cmocka_unit_test(key_length_boundary),
                cmocka_unit_test(long_header_is_hashed),
                cmocka_unit_test(key_text_limit_and_text_kept),
                cmocka_unit_test(hashed_spelling_is_hashed),
                cmocka_unit_test(json_depth_counted_on_bytes),
        };
        struct unit_list l = {0};

        unit_add_tests(&l, tests, sizeof(tests) / sizeof(tests[0]));
        unit_add_table(&l, derive_case, derive_cases);
        unit_add_table(&l, tmpl_case, tmpl_cases);
        unit_add_table(&l, compile_case, compile_cases);
        keyspec_free(NULL);
        return unit_run("keyspec", &l);
}
