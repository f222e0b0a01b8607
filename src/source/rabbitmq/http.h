/* http: one HTTP/1.0 GET over TCP or TLS, with a deadline — all the management API needs, without a client library. */
#ifndef DEDUPD_SOURCE_RABBITMQ_HTTP_H
#define DEDUPD_SOURCE_RABBITMQ_HTTP_H

#include <stddef.h>

/** Answers larger than this are refused (a queue object is a few kB). */
#define HTTP_REPLY_MAX (1024 * 1024)

struct http_reply {
        int status;      /* 200, 401, 404, ... */
        char *raw;       /* the whole answer, NUL-terminated; free with http_reply_free */
        const char *body; /* into raw */
        size_t body_len;
};

/** Where to ask: with tls, the server's certificate is verified against
 *  ca_file (NULL or "": the system's CAs) and host. */
struct http_target {
        const char *host, *port;
        int tls;
        const char *ca_file;
};

/**
 * GET path from t (HTTP/1.0, so the answer ends with the connection), with
 * "Authorization: Basic auth" when auth is not empty, everything within
 * timeout_ms. 0 with the status and body in *r (any status), or -1 with why
 * in err.
 */
int http_get(const struct http_target *t, const char *path, const char *auth, int timeout_ms, struct http_reply *r,
             char *err, size_t errsz) __attribute__((warn_unused_result));

void http_reply_free(struct http_reply *r);

#endif
