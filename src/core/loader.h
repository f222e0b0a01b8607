/* loader: opens a handler shared object and checks its ABI before anything runs. */
#ifndef DEDUPD_LOADER_H
#define DEDUPD_LOADER_H

#include <stddef.h>

#include <jansson.h>

#include "dedupd/handler.h"

struct store;

struct handler {
        char *path;
        void *dl;
        const struct dedupd_handler *desc;
        void *state;
        int initialized;
        char log_prefix[96]; /* "handler:<name>" */
};

/**
 * dlopen (RTLD_NOW | RTLD_LOCAL) and check the descriptor: exported
 * symbol, ABI major, descriptor size, required callbacks. Returns 0, or -1
 * with exactly what differs in err. Nothing of the handler runs but its
 * descriptor function.
 */
int loader_open(struct handler *h, const char *path, char *err, size_t errsz) __attribute__((warn_unused_result));

/**
 * The descriptor checks of loader_open on their own (the fuzzer drives them):
 * ABI major first, then the size, then the required callbacks. Reads only
 * fields within the ABI's minimal descriptor. Returns 0, or -1 with what differs.
 */
int loader_check_desc(const struct dedupd_handler *d, const char *path, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** Call the handler's init() with its config subtree and setup's connection
 *  (setup may be NULL: the handler's init_conn gives NULL), for topic of
 *  namespace ns (what host->set_evidence declares for; NULL: nothing can be
 *  declared). */
int loader_init(struct handler *h, const json_t *config, struct store *setup, const char *ns, const char *topic,
                char *err, size_t errsz) __attribute__((warn_unused_result));

/** The handler's version string (descriptor, ABI 1.2), NULL when it has none. */
const char *loader_version(const struct handler *h);

/** 1 when the handler has reconcile() (descriptor, ABI 1.3). */
int loader_has_reconcile(const struct handler *h);

/** fini() (when initialized) and dlclose. Safe on a zeroed struct. */
void loader_close(struct handler *h);

#endif
