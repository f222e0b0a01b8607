/* fingerprint: the fingerprint-fields path — paths (one a line) NUL payload: a path the config accepts is one fingerprinting reads, and a payload's fingerprint does not depend on how its JSON is spelled. */
#include "fuzz.h"

#include <jansson.h>

#include "base/config.h"
#include "base/keyspec.h"

/* The config's verdict on fingerprint.fields: [path] (a JSON string is a YAML scalar). */
static int config_accepts(const char *path, char *why, size_t whysz)
{
        json_t *s = json_string(path);
        char *q = json_dumps(s, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
        char *yaml;
        struct config_errors errs = {0};
        struct config *cfg;
        int rc;

        json_decref(s);
        if (asprintf(&yaml,
                     "namespace: n\npostgres: {conninfo: \"dbname=x\"}\n"
                     "kafka: {bootstrap.servers: \"localhost:9\", group.id: g}\n"
                     "topics:\n  - name: t\n    key: {subject: \"{json:id}\"}\n    handler: {path: h.so}\n"
                     "    fingerprint: {fields: [%s]}\n",
                     q) < 0)
                abort();
        free(q);
        cfg = config_load_string("fp.yaml", yaml, &errs);
        rc = cfg != NULL;
        /* Every problem is said once, where it is: a failed ${...} is not also "not a path". */
        for (size_t i = 0; i + 1 < errs.cnt; i++)
                FUZZ_ASSERT(!strstr(errs.msgs[i], "not a path") || !strstr(errs.msgs[i + 1], "${"), "'%s' then '%s'",
                            errs.msgs[i], errs.msgs[i + 1]);
        snprintf(why, whysz, "%s", errs.cnt ? errs.msgs[0] : "");
        config_free(cfg);
        config_errors_clear(&errs);
        free(yaml);
        return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct fuzz_fields ff;
        json_t *paths = json_array();
        char fp1[65], fp2[65], why[512], err[256] = "";
        json_error_t jerr;

        fuzz_split(data, size, 2, &ff);
        char *save = NULL;
        for (char *p = strtok_r(ff.f[0], "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
                json_t *s = json_string(p);
                if (!s)
                        continue; /* not UTF-8: YAML would not hold it either */
                json_array_append_new(paths, s);
                if (json_array_size(paths) == 1) {
                        int config_ok = config_accepts(p, why, sizeof(why));
                        int reads = keyspec_path_check(p, err, sizeof(err)) == 0;
                        /* A YAML-level refusal says nothing about the path, and the
                         * config replaces ${...} in every value before reading it. */
                        if (!strstr(p, "${") && (config_ok || strstr(why, "fingerprint.fields")))
                                FUZZ_ASSERT(config_ok == reads,
                                            "path '%s': config %s it (%s), fingerprinting %s it (%s)", p,
                                            config_ok ? "accepts" : "refuses", why, reads ? "reads" : "refuses", err);
                }
        }
        const char *value = ff.cnt > 1 ? ff.f[1] : NULL;
        size_t len = ff.cnt > 1 ? ff.len[1] : 0;
        keyspec_fingerprint(paths, value, len, fp1);
        FUZZ_ASSERT(strlen(fp1) == 64, "fingerprint '%s'", fp1);
        json_t *root = value && len ? json_loadb(value, len, JSON_DECODE_ANY, &jerr) : NULL;
        if (root && json_array_size(paths)) {
                /* The same document spelled otherwise: indented, escaped, keys unsorted. */
                char *again = json_dumps(root, JSON_ENCODE_ANY | JSON_INDENT(3) | JSON_ENSURE_ASCII);
                if (again) {
                        keyspec_fingerprint(paths, again, strlen(again), fp2);
                        FUZZ_ASSERT(!strcmp(fp1, fp2), "'%s' and '%s' fingerprint differently", value, again);
                        free(again);
                }
        }
        json_decref(root);
        json_decref(paths);
        fuzz_fields_free(&ff);
        return 0;
}
