/* derive_diff: the differential property of keys — payloads whose key fields differ never derive one key; the spellings docs/configuring.md (Keys) calls one value always do. */
#include "fuzz.h"

#include <errno.h>
#include <inttypes.h>

#include <jansson.h>

#include "base/keyspec.h"

static struct keyspec *ks_ab, *ks_a;

/* {"a": a, "b": b} rendered by jansson, so escapes are right; b may be NULL. */
static char *payload_of(json_t *a, json_t *b, size_t flags)
{
        json_t *o = json_object();
        char *s;
        json_object_set_new(o, "a", a);
        if (b)
                json_object_set_new(o, "b", b);
        s = json_dumps(o, flags);
        json_decref(o);
        return s;
}

/* 0 and the key, or -1 (refused: not a key, nothing to compare). */
static int derive(const struct keyspec *ks, const char *payload, char key[KEYSPEC_MAX_KEY_LEN + 1])
{
        char err[512];
        struct record rec = {.value = payload, .value_len = strlen(payload)};
        return keyspec_derive(ks, &rec, key, KEYSPEC_MAX_KEY_LEN + 1, err, sizeof(err));
}

static int derive_str2(const char *x, size_t xl, const char *y, size_t yl, char key[KEYSPEC_MAX_KEY_LEN + 1])
{
        json_t *a = json_stringn(x, xl), *b = json_stringn(y, yl);
        int rc = -1;
        if (a && b) {
                char *p = payload_of(a, b, JSON_COMPACT);
                rc = derive(ks_ab, p, key);
                free(p);
        } else {
                json_decref(a);
                json_decref(b);
        }
        return rc;
}

static int derive_value(json_t *v, size_t flags, char key[KEYSPEC_MAX_KEY_LEN + 1])
{
        char *p;
        int rc;
        if (!v)
                return -1;
        p = payload_of(v, NULL, flags);
        rc = derive(ks_a, p, key);
        free(p);
        return rc;
}

/* Two (subject, request) pairs cut from the same bytes at two places:
 * the concatenation is equal, the fields are not. */
static void split_pairs(const char *s, size_t n, size_t k, size_t j)
{
        char k1[KEYSPEC_MAX_KEY_LEN + 1], k2[KEYSPEC_MAX_KEY_LEN + 1];
        if (k == j)
                return;
        if (derive_str2(s, k, s + k, n - k, k1) || derive_str2(s, j, s + j, n - j, k2))
                return;
        FUZZ_ASSERT(strcmp(k1, k2) != 0, "fields cut at %zu and at %zu of '%.*s' both make key '%s'", k, j, (int)n, s,
                    k1);
        /* Swapped fields: (x, y) and (y, x) with x != y. */
        if (k * 2 != n || memcmp(s, s + k, k)) {
                if (derive_str2(s + k, n - k, s, k, k2) == 0)
                        FUZZ_ASSERT(strcmp(k1, k2) != 0, "swapped fields of '%.*s' cut at %zu make one key '%s'",
                                    (int)n, s, k, k1);
        }
}

/* A derived key fed back as a field value names another key, unless the
 * value was that key already. */
static void feedback(const char *s, size_t n)
{
        char k1[KEYSPEC_MAX_KEY_LEN + 1], k2[KEYSPEC_MAX_KEY_LEN + 1];
        if (derive_value(json_stringn(s, n), JSON_COMPACT, k1))
                return;
        if (derive_value(json_string(k1), JSON_COMPACT, k2))
                return;
        FUZZ_ASSERT(strcmp(k1, k2) != 0 || (strlen(k1) == n && !memcmp(k1, s, n)),
                    "value '%.*s' (%zu bytes) and value '%s' make one key '%s'", n > 80 ? 80 : (int)n, s, n, k1, k2);
}

/* Promised equal (docs/configuring.md, Keys): a string and the integer it spells, true and
 * "true", and any escaping of the same string. */
static void equalities(const char *s, size_t n)
{
        char k1[KEYSPEC_MAX_KEY_LEN + 1], k2[KEYSPEC_MAX_KEY_LEN + 1];
        char *end;
        if (derive_value(json_stringn(s, n), JSON_COMPACT, k1) == 0 &&
            derive_value(json_stringn(s, n), JSON_COMPACT | JSON_ENSURE_ASCII, k2) == 0)
                FUZZ_ASSERT(!strcmp(k1, k2), "'%.*s' escaped two ways: keys '%s' and '%s'", (int)n, s, k1, k2);
        if (n > 0 && n < 21 && strlen(s) == n) {
                errno = 0;
                long long v = strtoll(s, &end, 10);
                char canon[32];
                snprintf(canon, sizeof(canon), "%lld", v);
                if (!errno && !*end && !strcmp(canon, s) && derive_value(json_integer(v), JSON_COMPACT, k1) == 0 &&
                    derive_value(json_string(s), JSON_COMPACT, k2) == 0)
                        FUZZ_ASSERT(!strcmp(k1, k2), "integer %lld and string \"%s\": keys '%s' and '%s'", v, s, k1,
                                    k2);
        }
        if ((n == 4 && !memcmp(s, "true", 4)) || (n == 5 && !memcmp(s, "false", 5))) {
                if (derive_value(json_boolean(n == 4), JSON_COMPACT, k1) == 0 &&
                    derive_value(json_stringn(s, n), JSON_COMPACT, k2) == 0)
                        FUZZ_ASSERT(!strcmp(k1, k2), "%s and \"%s\" differ", s, s);
        }
}

/* Two different integers never make one key; neither do an integer and a
 * string spelling another number. */
static void integers(const uint8_t *d, size_t size)
{
        char k1[KEYSPEC_MAX_KEY_LEN + 1], k2[KEYSPEC_MAX_KEY_LEN + 1], txt[32];
        int64_t i1, i2;
        if (size < 16)
                return;
        memcpy(&i1, d, 8);
        memcpy(&i2, d + 8, 8);
        if (i1 == i2)
                return;
        if (derive_value(json_integer(i1), JSON_COMPACT, k1) || derive_value(json_integer(i2), JSON_COMPACT, k2))
                return;
        FUZZ_ASSERT(strcmp(k1, k2) != 0, "integers %" PRId64 " and %" PRId64 " make key '%s'", i1, i2, k1);
        snprintf(txt, sizeof(txt), "%" PRId64, i2);
        if (derive_value(json_string(txt), JSON_COMPACT, k2) == 0)
                FUZZ_ASSERT(strcmp(k1, k2) != 0, "integer %" PRId64 " and string \"%s\" make key '%s'", i1, txt, k1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char err[256];
        if (!ks_ab) {
                ks_ab = keyspec_compile("{json:a}", "PAY", "{json:b}", err, sizeof(err));
                ks_a = keyspec_compile("{json:a}", NULL, NULL, err, sizeof(err));
                if (!ks_ab || !ks_a)
                        abort();
        }
        if (size < 2)
                return 0;
        size_t n = size - 2;
        char *s = malloc(n + 1); /* the value's bytes, NUL-terminated for the messages */
        memcpy(s, data + 2, n);
        s[n] = '\0';
        split_pairs(s, n, data[0] % (n + 1), data[1] % (n + 1));
        feedback(s, n);
        equalities(s, n);
        integers(data, size);
        free(s);
        return 0;
}
