/* derive: key derivation from hostile messages — payload, Kafka key and headers (NUL-separated) against the templates a config may hold. */
#include "fuzz.h"

#include "base/json_depth.h"
#include "base/keyspec.h"

static const char *const specs[][3] = {
        {"{json:order_id}", "PAY", "{header:request-id}"},
        {"{json:a.b[0].c}", "{key}", NULL},
        {"u-{key}-{header:h}", NULL, NULL},
        {"{json:x}{json:y}", "PAY", "{json:z[1]}"},
        {"{json:[0]}", NULL, "{json:[1].id}"},
};
#define SPEC_CNT (sizeof(specs) / sizeof(*specs))

/* How deep a parsed document nests: a scalar is 0, [] is 1. */
static size_t tree_depth(const json_t *v)
{
        size_t d = 0, i;
        const char *k;
        json_t *e;
        if (json_is_array(v)) {
                json_array_foreach(v, i, e)
                {
                        size_t x = tree_depth(e);
                        d = x > d ? x : d;
                }
                return d + 1;
        }
        if (json_is_object(v)) {
                json_object_foreach((json_t *)v, k, e)
                {
                        size_t x = tree_depth(e);
                        d = x > d ? x : d;
                }
                return d + 1;
        }
        return 0;
}

/* limits.json_depth counts on the bytes before parsing: it must never see
 * less nesting than the parser builds, or a payload would pass it. */
static void depth_never_undercounted(const char *value, size_t len)
{
        json_error_t jerr;
        /* Without duplicate members (keys refuse them anyway) the bytes nest
         * exactly as deep as the tree: a dropped duplicate can be deeper. */
        json_t *root = json_loadb(value, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
        if (!root)
                return;
        size_t d = tree_depth(root);
        if (d > 0)
                FUZZ_ASSERT(json_depth_over(value, len, d - 1) >= d, "document %zu deep, counted within %zu", d, d - 1);
        FUZZ_ASSERT(json_depth_over(value, len, d) == 0, "document %zu deep counted deeper", d);
        json_decref(root);
}

/* A derived key is stored as PostgreSQL text: non-empty, no NUL, at most KEYSPEC_MAX_KEY_LEN. */
static void check_key(const char *key)
{
        size_t n = strlen(key);
        FUZZ_ASSERT(n > 0 && n <= KEYSPEC_MAX_KEY_LEN, "key of %zu bytes", n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct keyspec *ks[SPEC_CNT];
        struct fuzz_fields ff;
        struct dedupd_header h[3];
        char err[512], key[KEYSPEC_MAX_KEY_LEN + 1];

        if (!ks[0])
                for (size_t i = 0; i < SPEC_CNT; i++)
                        if (!(ks[i] = keyspec_compile(specs[i][0], specs[i][1], specs[i][2], err, sizeof(err))))
                                abort();
        /* payload \0 key \0 request-id \0 h \0 request-id (the last of a name wins) */
        fuzz_split(data, size, 5, &ff);
        const char *names[3] = {"request-id", "h", "request-id"};
        size_t hc = 0;
        for (size_t i = 2; i < ff.cnt; i++, hc++)
                h[hc] = (struct dedupd_header){names[i - 2], ff.f[i], ff.len[i]};
        struct record rec = {.key = ff.cnt > 1 ? ff.f[1] : NULL,
                             .key_len = ff.cnt > 1 ? ff.len[1] : 0,
                             .value = ff.f[0],
                             .value_len = ff.len[0],
                             .headers = h,
                             .header_cnt = hc,
                             .props = h,
                             .prop_cnt = hc};
        depth_never_undercounted(ff.f[0], ff.len[0]);
        for (size_t i = 0; i < SPEC_CNT; i++) {
                if (keyspec_derive(ks[i], &rec, key, sizeof(key), err, sizeof(err)) == 0)
                        check_key(key);
                else
                        FUZZ_ASSERT(err[0], "refused without a reason");
        }
        fuzz_fields_free(&ff);
        return 0;
}
