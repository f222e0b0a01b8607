/* http: one HTTP/1.0 GET over plain TCP, with a deadline — all the management API needs, without a client library. */
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

static int send_all(int fd, const char *p, size_t n, int64_t deadline)
{
        while (n) {
                ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
                if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
                        if (wait_fd(fd, POLLOUT, deadline))
                                return -1;
                        continue;
                }
                if (w <= 0)
                        return -1;
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

/* Everything until the peer closes: 0, or -1 (an error, the deadline, too large). */
static int recv_all(int fd, struct strbuf *b, int64_t deadline)
{
        char buf[16384];
        for (;;) {
                ssize_t n = recv(fd, buf, sizeof(buf), 0);
                if (n == 0)
                        return 0;
                if (n < 0 && errno != EAGAIN && errno != EINTR)
                        return -1;
                if (n < 0 && wait_fd(fd, POLLIN, deadline))
                        return -1;
                if (n > 0)
                        strbuf_add(b, buf, (size_t)n);
                if (b->len > HTTP_REPLY_MAX)
                        return -1;
        }
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

int http_get(const char *host, const char *port, const char *path, const char *auth, int timeout_ms,
             struct http_reply *r, char *err, size_t errsz)
{
        int64_t deadline = now_ms() + timeout_ms;
        struct strbuf req = {0}, ans = {0};
        int rc = -1, fd = dial(host, port, deadline, err, errsz);
        memset(r, 0, sizeof(*r));
        if (fd < 0)
                return -1;
        strbuf_adds(&req, "GET ");
        strbuf_adds(&req, path);
        strbuf_adds(&req, " HTTP/1.0\r\nHost: ");
        strbuf_adds(&req, strchr(host, ':') ? "[" : "");
        strbuf_adds(&req, host);
        strbuf_adds(&req, strchr(host, ':') ? "]:" : ":");
        strbuf_adds(&req, port);
        strbuf_adds(&req, "\r\nAccept: application/json\r\nConnection: close\r\n");
        if (*auth) {
                strbuf_adds(&req, "Authorization: Basic ");
                strbuf_adds(&req, auth);
                strbuf_adds(&req, "\r\n");
        }
        strbuf_adds(&req, "\r\n");
        if (send_all(fd, req.p, req.len, deadline) || recv_all(fd, &ans, deadline))
                snprintf(err, errsz, "%s:%s: %s", host, port,
                         ans.len > HTTP_REPLY_MAX ? "the answer is larger than 1 MB" : "no complete answer in time");
        else {
                r->raw = ans.p;
                ans.p = NULL;
                rc = parse_reply(r, err, errsz);
        }
        close(fd);
        free(req.p);
        free(ans.p);
        return rc;
}

void http_reply_free(struct http_reply *r)
{
        free(r->raw);
        memset(r, 0, sizeof(*r));
}
