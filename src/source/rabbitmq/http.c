/* http: one HTTP/1.0 GET over TCP or TLS, with a deadline — all the management API needs, without a client library. */
#include "source/rabbitmq/http.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/strbuf.h"

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Until fd is ready for ev, at most until deadline: 0, or -1 (timed out). */
static int wait_fd(int fd, short ev, int64_t deadline)
{
        struct pollfd p = {.fd = fd, .events = ev};
        int n;
        do {
                int64_t left = deadline - now_ms();
                if (left <= 0)
                        return -1;
                n = poll(&p, 1, (int)left);
        } while (n < 0 && errno == EINTR);
        return n > 0 ? 0 : -1;
}

/* A non-blocking connect to one address, finished within the deadline. */
static int connect_one(const struct addrinfo *ai, int64_t deadline)
{
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        int soerr = 0;
        socklen_t len = sizeof(soerr);
        if (fd < 0)
                return -1;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
                return fd;
        if (errno == EINPROGRESS && !wait_fd(fd, POLLOUT, deadline) &&
            !getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) && !soerr)
                return fd;
        errno = soerr ? soerr : errno == EINPROGRESS ? ETIMEDOUT : errno;
        close(fd);
        return -1;
}

static int dial(const char *host, const char *port, int64_t deadline, char *err, size_t errsz)
{
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
        int fd = -1, gai = getaddrinfo(host, port, &hints, &res);
        if (gai) {
                snprintf(err, errsz, "cannot resolve %s: %s", host, gai_strerror(gai));
                return -1;
        }
        for (const struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
                fd = connect_one(ai, deadline);
        if (fd < 0)
                snprintf(err, errsz, "cannot connect to %s:%s: %s", host, port, strerror(errno));
        freeaddrinfo(res);
        return fd;
}

/* One connection, plain or TLS, and the deadline everything on it keeps. */
struct conn {
        int fd;
        SSL_CTX *ctx;
        SSL *ssl;
        int64_t deadline;
};

/* After an SSL call returned r: wait for what it wants, 0; or -1 (an error, the deadline). */
static int tls_wait(struct conn *c, int r)
{
        int e = SSL_get_error(c->ssl, r);
        if (e == SSL_ERROR_WANT_READ)
                return wait_fd(c->fd, POLLIN, c->deadline);
        if (e == SSL_ERROR_WANT_WRITE)
                return wait_fd(c->fd, POLLOUT, c->deadline);
        return -1;
}

/* What OpenSSL says went wrong: the certificate check first, it is the usual cause. */
static void tls_error(struct conn *c, char *err, size_t errsz)
{
        long v = SSL_get_verify_result(c->ssl);
        unsigned long e = ERR_get_error();
        char why[256];
        ERR_error_string_n(e, why, sizeof(why));
        if (v != X509_V_OK)
                snprintf(err, errsz, "TLS: the server's certificate is not trusted: %s",
                         X509_verify_cert_error_string(v));
        else
                snprintf(err, errsz, "TLS handshake failed: %s", e ? why : "the peer closed the connection");
}

/* The server's certificate verified against ca_file ("": the system's CAs) and host (a name or an address). */
static int tls_start(struct conn *c, const char *host, const char *ca_file, char *err, size_t errsz)
{
        int r;
        ERR_clear_error();
        if (!(c->ctx = SSL_CTX_new(TLS_client_method())) ||
            (*ca_file ? SSL_CTX_load_verify_locations(c->ctx, ca_file, NULL) != 1
                      : SSL_CTX_set_default_verify_paths(c->ctx) != 1)) {
                snprintf(err, errsz, "TLS: cannot load the CA certificates%s%s", *ca_file ? " of " : "", ca_file);
                return -1;
        }
        SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
        /* An HTTP/1.0 answer ends where the server closes, close_notify or
         * not; a cut answer is still caught, as JSON that does not parse. */
        SSL_CTX_set_options(c->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
        c->ssl = SSL_new(c->ctx);
        if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) {
                snprintf(err, errsz, "TLS: cannot set up the connection");
                return -1;
        }
        /* An address is checked as one; a name is also sent (SNI). */
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), host) != 1) {
                SSL_set_tlsext_host_name(c->ssl, host);
                SSL_set1_host(c->ssl, host);
        }
        while ((r = SSL_connect(c->ssl)) != 1)
                if (tls_wait(c, r)) {
                        tls_error(c, err, errsz);
                        return -1;
                }
        return 0;
}

static int conn_write(struct conn *c, const char *p, size_t n)
{
        while (n) {
                ssize_t w;
                if (c->ssl) {
                        int r = SSL_write(c->ssl, p, (int)n);
                        if (r <= 0 && tls_wait(c, r))
                                return -1;
                        w = r > 0 ? r : 0;
                } else {
                        w = send(c->fd, p, n, MSG_NOSIGNAL);
                        if (w < 0 && (errno == EAGAIN || errno == EINTR) && !wait_fd(c->fd, POLLOUT, c->deadline))
                                continue;
                        if (w <= 0)
                                return -1;
                }
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

/* Up to n bytes: how many, 0 at the end (an HTTP/1.0 server closes, with or without TLS's close_notify), -1. */
static ssize_t conn_read(struct conn *c, char *buf, size_t n)
{
        for (;;) {
                if (c->ssl) {
                        int r = SSL_read(c->ssl, buf, (int)n);
                        int e = r > 0 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
                        if (r > 0)
                                return r;
                        if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && !ERR_peek_error()))
                                return 0;
                        if (tls_wait(c, r))
                                return -1;
                        continue;
                }
                ssize_t r = recv(c->fd, buf, n, 0);
                if (r >= 0)
                        return r;
                if ((errno != EAGAIN && errno != EINTR) || wait_fd(c->fd, POLLIN, c->deadline))
                        return -1;
        }
}

/* Everything until the peer closes: 0, or -1 (an error, the deadline, too large). */
static int read_all(struct conn *c, struct strbuf *b)
{
        char buf[16384];
        ssize_t n;
        while ((n = conn_read(c, buf, sizeof(buf))) > 0) {
                strbuf_add(b, buf, (size_t)n);
                if (b->len > HTTP_REPLY_MAX)
                        return -1;
        }
        return n < 0 ? -1 : 0;
}

static void conn_close(struct conn *c)
{
        SSL_free(c->ssl);
        SSL_CTX_free(c->ctx);
        if (c->fd >= 0)
                close(c->fd);
}

/* "HTTP/1.1 200 OK\r\n...\r\n\r\nbody": the status and where the body starts. */
static int parse_reply(struct http_reply *r, char *err, size_t errsz)
{
        char *end = r->raw ? strstr(r->raw, "\r\n\r\n") : NULL;
        if (!end || sscanf(r->raw, "HTTP/%*d.%*d %d", &r->status) != 1) {
                snprintf(err, errsz, "the answer is not HTTP");
                return -1;
        }
        r->body = end + 4;
        r->body_len = strlen(r->body);
        return 0;
}

static void request(struct strbuf *req, const struct http_target *t, const char *path, const char *auth)
{
        int v6 = strchr(t->host, ':') != NULL;
        strbuf_adds(req, "GET ");
        strbuf_adds(req, path);
        strbuf_adds(req, " HTTP/1.0\r\nHost: ");
        strbuf_adds(req, v6 ? "[" : "");
        strbuf_adds(req, t->host);
        strbuf_adds(req, v6 ? "]:" : ":");
        strbuf_adds(req, t->port);
        strbuf_adds(req, "\r\nAccept: application/json\r\nConnection: close\r\n");
        if (*auth) {
                strbuf_adds(req, "Authorization: Basic ");
                strbuf_adds(req, auth);
                strbuf_adds(req, "\r\n");
        }
        strbuf_adds(req, "\r\n");
}

int http_get(const struct http_target *t, const char *path, const char *auth, int timeout_ms, struct http_reply *r,
             char *err, size_t errsz)
{
        struct conn c = {.fd = -1, .deadline = now_ms() + timeout_ms};
        struct strbuf req = {0}, ans = {0};
        int rc = -1;
        memset(r, 0, sizeof(*r));
        if ((c.fd = dial(t->host, t->port, c.deadline, err, errsz)) < 0 ||
            (t->tls && tls_start(&c, t->host, t->ca_file ? t->ca_file : "", err, errsz)))
                goto out;
        request(&req, t, path, auth);
        if (conn_write(&c, req.p, req.len) || read_all(&c, &ans)) {
                snprintf(err, errsz, "%s:%s: %s", t->host, t->port,
                         ans.len > HTTP_REPLY_MAX ? "the answer is larger than 1 MB" : "no complete answer in time");
                goto out;
        }
        r->raw = ans.p;
        ans.p = NULL;
        rc = parse_reply(r, err, errsz);
out:
        conn_close(&c);
        free(req.p);
        free(ans.p);
        return rc;
}

void http_reply_free(struct http_reply *r)
{
        free(r->raw);
        memset(r, 0, sizeof(*r));
}
