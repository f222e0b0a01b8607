/* http: the operator's endpoints — /metrics (Prometheus), /healthz, /readyz — served by libmicrohttpd's own thread. */
#ifndef DEDUPD_OPS_HTTP_H
#define DEDUPD_OPS_HTTP_H

#include <stddef.h>

struct http;

/**
 * Serve on listen ("host:port", "[v6]:port"; port 0 picks a free one).
 * Returns NULL with the reason (address unparsable, or in use).
 */
struct http *http_start(const char *listen, char *err, size_t errsz) __attribute__((warn_unused_result));
/** The address actually bound, "host:port". */
const char *http_address(const struct http *h);
void http_stop(struct http *h);

#endif
