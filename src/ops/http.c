/* http: the operator's endpoints — /metrics (Prometheus), /healthz, /readyz — served by libmicrohttpd's own thread. */
#include "ops/http.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "base/log.h"
#include "base/mem.h"
#include "ops/health.h"
#include "ops/metrics.h"

#define PROMETHEUS_TEXT "text/plain; version=0.0.4; charset=utf-8"

struct http {
        struct MHD_Daemon *d;
        char address[300];
};

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *type, char *body)
{
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(r, "Content-Type", type);
        MHD_add_response_header(r, "Cache-Control", "no-store");
        enum MHD_Result rc = MHD_queue_response(c, status, r);
        MHD_destroy_response(r);
        return rc;
}

static char *text(const char *fmt, const char *arg)
{
        size_t n = strlen(fmt) + strlen(arg) + 1;
        char *s = xmalloc(n);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        snprintf(s, n, fmt, arg);
#pragma GCC diagnostic pop
        return s;
}

static enum MHD_Result probe(struct MHD_Connection *c, int ready)
{
        char why[2048];
        int ok = ready ? health_ready(log_now_ms(), why, sizeof(why)) : health_alive(log_now_ms(), why, sizeof(why));
        return respond(c, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8",
                       ok ? xstrdup("ok\n") : text(ready ? "not ready: %s\n" : "not alive: %s\n", why));
}

static enum MHD_Result serve(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, const char *upload, size_t *upload_size, void **state)
{
        char why[2048];
        (void)cls;
        (void)version;
        (void)upload;
        (void)upload_size;
        (void)state;
        if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
                return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", xstrdup("GET only\n"));
        if (!strcmp(url, "/metrics")) {
                health_ready(log_now_ms(), why, sizeof(why)); /* dedupd_ready as of this scrape */
                char *body = metrics_render();
                return respond(c, MHD_HTTP_OK, PROMETHEUS_TEXT, body ? body : xstrdup(""));
        }
        if (!strcmp(url, "/healthz"))
                return probe(c, 0);
        if (!strcmp(url, "/readyz"))
                return probe(c, 1);
        return respond(c, MHD_HTTP_NOT_FOUND, "text/plain", text("no %s here: /metrics, /healthz, /readyz\n", url));
}

/* "host:port" or "[v6]:port" into an address. */
static int resolve(const char *listen, struct addrinfo **ai, char *err, size_t errsz)
{
        char host[256];
        const char *colon = strrchr(listen, ':');
        const char *h = listen;
        size_t hl;
        if (!colon || !colon[1]) {
                snprintf(err, errsz, "http.listen '%s' is not host:port", listen);
                return -1;
        }
        hl = (size_t)(colon - listen);
        if (hl >= 2 && listen[0] == '[' && listen[hl - 1] == ']') {
                h++;
                hl -= 2;
        }
        snprintf(host, sizeof(host), "%.*s", (int)hl, h);
        struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
        int rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, ai);
        if (rc) {
                snprintf(err, errsz, "http.listen '%s': %s", listen, gai_strerror(rc));
                return -1;
        }
        return 0;
}

struct http *http_start(const char *listen, char *err, size_t errsz)
{
        struct addrinfo *ai = NULL;
        char host[256] = "?";
        if (resolve(listen, &ai, err, errsz))
                return NULL;
        struct http *h = xcalloc(1, sizeof(*h));
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
        h->d = MHD_start_daemon(flags, 0, NULL, NULL, serve, NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
        getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof(host), NULL, 0, NI_NUMERICHOST);
        int v6 = ai->ai_family == AF_INET6;
        freeaddrinfo(ai);
        if (!h->d) {
                snprintf(err, errsz, "http.listen '%s': cannot listen there (in use, or not this host's address)",
                         listen);
                free(h);
                return NULL;
        }
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
        snprintf(h->address, sizeof(h->address), v6 ? "[%s]:%u" : "%s:%u", host, info ? info->port : 0u);
        return h;
}

const char *http_address(const struct http *h) { return h->address; }

void http_stop(struct http *h)
{
        if (!h)
                return;
        MHD_stop_daemon(h->d);
        free(h);
}
