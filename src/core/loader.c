/* loader: opens a handler shared object and checks its ABI before anything runs. */
#include "core/loader.h"

#include "base/mem.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/host.h"

/* The descriptor as of ABI 1.0 ends with fini: anything shorter is refused. */
#define MIN_DESC_SIZE (offsetof(struct dedupd_handler, fini) + sizeof(((struct dedupd_handler *)0)->fini))

int loader_check_desc(const struct dedupd_handler *d, const char *path, char *err, size_t errsz)
{
        if (d->abi_major != DEDUPD_HANDLER_ABI_MAJOR) {
                snprintf(err, errsz,
                         "handler %s: ABI major version %u, but this dedupd speaks ABI %u; rebuild "
                         "the handler against this dedupd's dedupd/handler.h",
                         path, d->abi_major, DEDUPD_HANDLER_ABI_MAJOR);
                return -1;
        }
        if (d->size < MIN_DESC_SIZE) {
                snprintf(err, errsz,
                         "handler %s: descriptor size %u bytes is smaller than the %zu bytes ABI %u "
                         "requires; rebuild the handler against dedupd/handler.h",
                         path, d->size, (size_t)MIN_DESC_SIZE, DEDUPD_HANDLER_ABI_MAJOR);
                return -1;
        }
        if (!d->handle && !d->handle_batch) {
                snprintf(err, errsz, "handler %s: descriptor has neither handle() nor handle_batch()", path);
                return -1;
        }
        return 0;
}

int loader_open(struct handler *h, const char *path, char *err, size_t errsz)
{
        dedupd_handler_fn fn;
        const struct dedupd_handler *d;
        char *rel = NULL;

        memset(h, 0, sizeof(*h));
        h->path = xstrdup(path);
        /* dlopen() searches the library path for a name without a slash; a
         * relative handler path is relative to the working directory. */
        if (!strchr(path, '/'))
                rel = xasprintf("./%s", path);
        dlerror();
        h->dl = dlopen(rel ? rel : path, RTLD_NOW | RTLD_LOCAL);
        free(rel);
        if (!h->dl) {
                /* dlerror names the missing file or the unresolved symbol. */
                snprintf(err, errsz, "handler %s: cannot load: %s", path, dlerror());
                goto error;
        }
        *(void **)&fn = dlsym(h->dl, DEDUPD_HANDLER_SYMBOL);
        if (!fn) {
                snprintf(err, errsz,
                         "handler %s: missing symbol %s() (build it with DEDUPD_HANDLER_EXPORT "
                         "from dedupd/handler.h)",
                         path, DEDUPD_HANDLER_SYMBOL);
                goto error;
        }
        d = fn();
        if (!d) {
                snprintf(err, errsz, "handler %s: %s() returned NULL", path, DEDUPD_HANDLER_SYMBOL);
                goto error;
        }
        if (loader_check_desc(d, path, err, errsz))
                goto error;
        h->desc = d;
        snprintf(h->log_prefix, sizeof(h->log_prefix), "handler:%s", d->name && *d->name ? d->name : path);
        return 0;
error:
        loader_close(h);
        return -1;
}

int loader_init(struct handler *h, const json_t *config, struct store *setup, const char *ns, const char *topic,
                char *err, size_t errsz)
{
        struct dedupd_init_ctx ictx = {.head = {&host_api, setup, NULL},
                                       .config = config,
                                       .log_prefix = h->log_prefix,
                                       .ns = ns,
                                       .topic = topic,
                                       .handler = h->desc->name && *h->desc->name ? h->desc->name : h->path};
        char herr[512] = "";

        if (!h->desc->init) {
                h->initialized = 1;
                return 0;
        }
        int rc = h->desc->init(&host_api, &ictx, &h->state, herr, sizeof(herr));
        host_ctx_release(&ictx.head);
        if (rc != 0) {
                snprintf(err, errsz, "handler %s: init failed: %s", h->path,
                         herr[0]         ? herr
                         : ictx.error[0] ? ictx.error
                                         : "(no message)");
                return -1;
        }
        h->initialized = 1;
        return 0;
}

const char *loader_version(const struct handler *h)
{
        return DEDUPD_HANDLER_HAS(h->desc, version) && h->desc->version && *h->desc->version ? h->desc->version : NULL;
}

int loader_has_reconcile(const struct handler *h)
{
        return h && h->desc && DEDUPD_HANDLER_HAS(h->desc, reconcile) && h->desc->reconcile;
}

void loader_close(struct handler *h)
{
        if (h->initialized && h->desc && h->desc->fini)
                h->desc->fini(h->state);
        if (h->dl)
                dlclose(h->dl);
        free(h->path);
        memset(h, 0, sizeof(*h));
}
