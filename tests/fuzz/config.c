/* config: YAML bytes in, through the real loader (bounds, table, checks across keys), then dump and free. */
#include "fuzz.h"

#include "base/config.h"
#include "base/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static FILE *sink;
        struct config_errors errs = {0};
        char *yaml = malloc(size + 1);
        struct config *cfg;

        if (!sink) {
                sink = fopen("/dev/null", "w");
                log_set_level(LOG_ERROR);
        }
        memcpy(yaml, data, size);
        yaml[size] = '\0';
        cfg = config_load_string("fuzz.yaml", yaml, &errs);
        /* A config is either loaded or refused with at least one reason. */
        FUZZ_ASSERT(cfg || errs.cnt > 0, "refused without a message");
        for (size_t i = 0; i < errs.cnt; i++)
                FUZZ_ASSERT(!strncmp(errs.msgs[i], "fuzz.yaml:", 10), "message without position: %s", errs.msgs[i]);
        if (cfg) {
                config_dump(cfg, sink);
                config_free(cfg);
        }
        config_errors_clear(&errs);
        free(yaml);
        return 0;
}
