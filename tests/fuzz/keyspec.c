/* keyspec: the key-template compiler — subject, action and request templates (NUL-separated) compiled, then derived against one message. */
#include "fuzz.h"

#include "base/keyspec.h"

static const char payload[] = "{\"a\":{\"b\":[{\"c\":\"x/y%z\"}]},\"order_id\":9527,\"id\":\"o-1\",\"t\":true}";
static const struct dedupd_header headers[] = {
        {"request-id", "r-1", 3},
        {"h", "v", 1},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct fuzz_fields ff;
        char err[512], key[KEYSPEC_MAX_KEY_LEN + 1];
        struct record rec = {.key = "k-1",
                             .key_len = 3,
                             .value = payload,
                             .value_len = sizeof(payload) - 1,
                             .headers = headers,
                             .header_cnt = 2,
                             .props = headers,
                             .prop_cnt = 2};

        fuzz_split(data, size, 3, &ff);
        struct keyspec *ks = keyspec_compile(ff.f[0], ff.f[1], ff.f[2], err, sizeof(err));
        if (ks) {
                if (keyspec_derive(ks, &rec, key, sizeof(key), err, sizeof(err)) == 0)
                        FUZZ_ASSERT(strlen(key) <= KEYSPEC_MAX_KEY_LEN && key[0], "key '%s'", key);
                keyspec_free(ks);
        }
        /* Every template on its own: check and compile agree. */
        for (size_t i = 0; i < ff.cnt; i++) {
                int ok = keyspec_template_check(ff.f[i], err, sizeof(err)) == 0;
                struct keytmpl *kt = keytmpl_compile(ff.f[i], err, sizeof(err));
                FUZZ_ASSERT(ok == (kt != NULL), "check says %d, compile says %p for '%s'", ok, (void *)kt, ff.f[i]);
                if (kt) {
                        char rerr[512];
                        json_t *root = keytmpl_needs_json(kt) ? keyspec_load_json(&rec, rerr, sizeof(rerr)) : NULL;
                        free(keytmpl_render(kt, &rec, root, rerr, sizeof(rerr)));
                        json_decref(root);
                        keytmpl_free(kt);
                }
        }
        fuzz_fields_free(&ff);
        return 0;
}
