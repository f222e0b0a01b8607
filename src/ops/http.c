/* http: the operator's endpoints — /metrics (Prometheus), /healthz, /readyz — served by libmicrohttpd's own polling thread, within bounds on connections. */
#include "ops/http.h"

#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "base/hostport.h"
#include "base/log.h"
#include "base/mem.h"
#include "ops/health.h"
#include "ops/metrics.h"

#define PROMETHEUS_TEXT "text/plain; version=0.0.4; charset=utf-8"

struct http {
        struct MHD_Daemon *d;
        char address[300];
        struct log_ratelimit rl; /* libmicrohttpd's messages */
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
        char host[256], port[8], why[300];
        if (hostport_split(listen, host, sizeof(host), port, sizeof(port), why, sizeof(why))) {
                snprintf(err, errsz, "http.listen %s", why);
                return -1;
        }
        struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
        int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, ai);
        if (rc) {
                snprintf(err, errsz, "http.listen '%s': %s", listen, gai_strerror(rc));
                return -1;
        }
        return 0;
}

/* libmicrohttpd's own words (a refused connection, a limit reached) into the log, a few a
 * minute: a client that opens sockets in a loop must not flood the log either. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
        struct http *h = cls;
        char msg[512];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        vsnprintf(msg, sizeof(msg), fmt, ap);
#pragma GCC diagnostic pop
        msg[strcspn(msg, "\n")] = '\0';
        log_limited(&h->rl, 5, 60000, LOG_WARN, "http", "%s", msg);
}

struct http *http_start(const struct http_opts *o, char *err, size_t errsz)
{
        struct addrinfo *ai = NULL;
        char host[256] = "?";
        if (resolve(o->listen, &ai, err, errsz))
                return NULL;
        struct http *h = xcalloc(1, sizeof(*h));
        /* One thread polling with epoll (poll where there is none): an idle connection is one
         * descriptor in its set, never a thread blocked on it, so /readyz is served beside any
         * number of them — up to the limits, which are what keeps them few. */
        unsigned flags =
                MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
        h->d = MHD_start_daemon(flags, 0, NULL, NULL, serve, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
                                MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, o->max_connections,
                                MHD_OPTION_PER_IP_CONNECTION_LIMIT, o->max_connections_per_ip,
                                MHD_OPTION_CONNECTION_TIMEOUT, o->idle_timeout_s, MHD_OPTION_END);
        getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof(host), NULL, 0, NI_NUMERICHOST);
        int v6 = ai->ai_family == AF_INET6;
        freeaddrinfo(ai);
        if (!h->d) {
                snprintf(err, errsz, "http.listen '%s': cannot listen there (in use, or not this host's address)",
                         o->listen);
                log_ratelimit_flush(&h->rl);
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
        log_ratelimit_flush(&h->rl);
        free(h);
}
