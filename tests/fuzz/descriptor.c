/* descriptor: the handler-descriptor check — a descriptor of any size and contents, laid out in exactly the bytes it claims, checked as loader_open checks it. */
#include "fuzz.h"

#include <stddef.h>

#include "core/loader.h"

static dedupd_result_t handle(void *state, struct dedupd_ctx *ctx, const struct dedupd_msg *msg) { return DEDUPD_OK; }
static dedupd_result_t handle_batch(void *state, struct dedupd_ctx *const *ctxs, const struct dedupd_msg *const *msgs,
                                    size_t cnt, dedupd_result_t *results)
{
        return DEDUPD_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct dedupd_handler tmpl;
        uint32_t claimed;
        char err[512];

        /* abi_major, size, and one byte saying which pointers are set. */
        if (size < 9)
                return 0;
        memset(&tmpl, 0, sizeof(tmpl));
        memcpy(&tmpl, data, size - 1 < sizeof(tmpl) ? size - 1 : sizeof(tmpl));
        uint8_t ptrs = data[size - 1];
        tmpl.name = ptrs & 1 ? "fuzz" : NULL;
        tmpl.init = NULL;
        tmpl.handle = ptrs & 2 ? handle : NULL;
        tmpl.handle_batch = ptrs & 4 ? handle_batch : NULL;
        tmpl.fini = NULL;
        tmpl.evidence_table = ptrs & 8 ? "ledger" : NULL;
        tmpl.evidence_key_column = ptrs & 16 ? "idem_key" : NULL;
        /* A handler built against an older header has only `size` bytes. */
        claimed = tmpl.size < 8 ? 8 : tmpl.size > sizeof(tmpl) + 64 ? (uint32_t)sizeof(tmpl) + 64 : tmpl.size;
        unsigned char *mem = malloc(claimed);
        memset(mem, 0xA5, claimed);
        memcpy(mem, &tmpl, claimed < sizeof(tmpl) ? claimed : sizeof(tmpl));
        const struct dedupd_handler *d = (const struct dedupd_handler *)mem;
        if (loader_check_desc(d, "fuzz.so", err, sizeof(err)) == 0) {
                FUZZ_ASSERT(d->abi_major == DEDUPD_HANDLER_ABI_MAJOR, "ABI %u accepted", d->abi_major);
                FUZZ_ASSERT(d->handle || d->handle_batch, "no callback accepted");
                /* What the host reads next: the name, and appended fields only when present. */
                volatile const char *n = d->name;
                (void)n;
                if (DEDUPD_HANDLER_HAS(d, evidence_key_column)) {
                        volatile const char *e = d->evidence_table;
                        (void)e;
                }
        } else {
                FUZZ_ASSERT(err[0], "refused without a reason");
        }
        free(mem);
        return 0;
}
