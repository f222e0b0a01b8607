/* http: the operator's endpoints — /metrics (Prometheus), /healthz, /readyz — served by libmicrohttpd's own polling thread, within bounds on connections. */
#ifndef DEDUPD_OPS_HTTP_H
#define DEDUPD_OPS_HTTP_H

#include <stddef.h>

struct http;

/** What dedupd and dedupctl check say of an http.listen that is not loopback. */
#define HTTP_EXPOSED_WARNING                                                                                           \
        "/metrics, /healthz and /readyz answer whoever reaches it, with no authentication and no TLS; expose "         \
        "them only to the Prometheus network (a firewall, a NetworkPolicy) or through a reverse proxy that "           \
        "authenticates (docs/operating.md: Metrics and health)"

/** Where and within which bounds (the http: section). */
struct http_opts {
        const char *listen;              /* "host:port", "[v6]:port"; port 0 picks a free one */
        unsigned max_connections;        /* at once; more wait in the kernel's backlog */
        unsigned max_connections_per_ip; /* more from one address are closed at once */
        unsigned idle_timeout_s;         /* a connection silent this long is closed */
};

/** Serve as o says. Returns NULL with the reason (address unparsable, or in use). */
struct http *http_start(const struct http_opts *o, char *err, size_t errsz) __attribute__((warn_unused_result));
/** The address actually bound, "host:port". */
const char *http_address(const struct http *h);
void http_stop(struct http *h);

#endif
