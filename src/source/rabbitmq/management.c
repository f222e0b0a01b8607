/* management: the RabbitMQ management plugin's HTTP API, for what AMQP does not show — a queue's message TTL, from its arguments and its effective policy. */
#include "source/rabbitmq/management.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "base/hostport.h"
#include "base/strbuf.h"
#include "source/rabbitmq/http.h"

/* http[s]://[user:password@]host[:port][/path_prefix], split. */
struct mgmt_url {
        int tls;
        char host[256], port[8];
        char user[128];
        char auth[400]; /* base64 of user:password, "" without a login */
        char prefix[256];
};

/* %XX decoded into out (at most outsz - 1 bytes). */
static int pct_decode(const char *s, size_t n, char *out, size_t outsz)
{
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (c == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
                    isxdigit((unsigned char)s[i + 2])) {
                        char hex[3] = {s[i + 1], s[i + 2], 0};
                        c = (char)strtol(hex, NULL, 16);
                        i += 2;
                }
                if (o + 1 >= outsz)
                        return -1;
                out[o++] = c;
        }
        out[o] = '\0';
        return 0;
}

/* Everything but RFC 3986's unreserved characters as %XX: "/" is vhost "%2F". */
static void pct_encode(struct strbuf *b, const char *s)
{
        char hex[4];
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
                        strbuf_add(b, s, 1);
                        continue;
                }
                snprintf(hex, sizeof(hex), "%%%02X", c);
                strbuf_adds(b, hex);
        }
}

static int split_login(const char *s, size_t n, struct mgmt_url *u, char *err, size_t errsz)
{
        char login[300], pass[200];
        const char *colon = memchr(s, ':', n);
        size_t ulen = colon ? (size_t)(colon - s) : n;
        if (pct_decode(s, ulen, u->user, sizeof(u->user)) ||
            pct_decode(colon ? colon + 1 : "", colon ? n - ulen - 1 : 0, pass, sizeof(pass))) {
                snprintf(err, errsz, "the management URL's user or password is too long");
                return -1;
        }
        int len = snprintf(login, sizeof(login), "%s:%s", u->user, pass);
        if (len < 0 || (size_t)len >= sizeof(login) || (size_t)len * 4 / 3 + 4 >= sizeof(u->auth)) {
                snprintf(err, errsz, "the management URL's user or password is too long");
                return -1;
        }
        EVP_EncodeBlock((unsigned char *)u->auth, (const unsigned char *)login, len);
        return 0;
}

static int split_host(const char *s, size_t n, struct mgmt_url *u, char *err, size_t errsz)
{
        char hp[300], why[200];
        if (n >= sizeof(hp) - 7) {
                snprintf(err, errsz, "the management URL's host is too long");
                return -1;
        }
        memcpy(hp, s, n);
        hp[n] = '\0';
        /* The plugin's own default ports when none is written. */
        if (!strrchr(hp, ':') || (hp[0] == '[' && hp[n - 1] == ']'))
                strcat(hp, u->tls ? ":15671" : ":15672");
        if (hostport_split(hp, u->host, sizeof(u->host), u->port, sizeof(u->port), why, sizeof(why)) ||
            !*u->host) {
                snprintf(err, errsz, "the management URL's host:port does not parse: %s", *u->host ? why : "no host");
                return -1;
        }
        return 0;
}

static int parse_url(const char *url, struct mgmt_url *u, char *err, size_t errsz)
{
        memset(u, 0, sizeof(*u));
        u->tls = !strncmp(url, "https://", 8);
        if (!u->tls && strncmp(url, "http://", 7)) {
                snprintf(err, errsz, "the management URL must be http[s]://user:password@host:port");
                return -1;
        }
        const char *a = url + (u->tls ? 8 : 7), *slash = strchr(a, '/');
        size_t alen = slash ? (size_t)(slash - a) : strlen(a);
        const char *at = NULL;
        for (size_t i = 0; i < alen; i++)
                if (a[i] == '@')
                        at = a + i;
        if (at && split_login(a, (size_t)(at - a), u, err, errsz))
                return -1;
        if (at) {
                alen -= (size_t)(at + 1 - a);
                a = at + 1;
        }
        if (split_host(a, alen, u, err, errsz))
                return -1;
        snprintf(u->prefix, sizeof(u->prefix), "%s", slash ? slash : "");
        size_t pl = strlen(u->prefix);
        while (pl && u->prefix[pl - 1] == '/')
                u->prefix[--pl] = '\0';
        return 0;
}

/* The integer at obj.key, or -1 when absent (a policy with no message-ttl, no policy at all: null or {}). */
static int64_t ttl_at(json_t *obj, const char *key)
{
        json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
        return json_is_integer(v) && json_integer_value(v) >= 0 ? (int64_t)json_integer_value(v) : -1;
}

/* What the broker keeps, in its words: which of argument and policy decides. */
static void ttl_words(struct rmq_queue_ttl *t, int64_t arg, int64_t pol, const char *policy)
{
        if (arg < 0 && pol < 0) {
                t->ms = -1;
                snprintf(t->said, sizeof(t->said), "no message TTL: neither x-message-ttl nor a policy's message-ttl");
                return;
        }
        t->ms = arg < 0 || (pol >= 0 && pol < arg) ? pol : arg;
        if (t->ms == arg)
                snprintf(t->said, sizeof(t->said), "x-message-ttl=%" PRId64, arg);
        else
                snprintf(t->said, sizeof(t->said), "message-ttl=%" PRId64 " of policy %s", pol, policy);
}

/* The queue object the API returned: its argument and its effective policy's message-ttl. */
static int read_queue(const char *body, size_t len, struct rmq_queue_ttl *t, char *err, size_t errsz)
{
        json_error_t je;
        json_t *q = json_loadb(body, len, 0, &je);
        if (!json_is_object(q)) {
                snprintf(err, errsz, "the management API's answer is not a JSON object: %s", je.text);
                json_decref(q);
                return -1;
        }
        const char *pol = json_string_value(json_object_get(q, "policy"));
        const char *op = json_string_value(json_object_get(q, "operator_policy"));
        char names[160];
        snprintf(names, sizeof(names), "%s%s%s%s", pol ? pol : "", pol && op ? ", operator policy " : "",
                 !pol && op ? "(operator) " : "", op ? op : "");
        ttl_words(t, ttl_at(json_object_get(q, "arguments"), "x-message-ttl"),
                  ttl_at(json_object_get(q, "effective_policy_definition"), "message-ttl"), names);
        json_decref(q);
        return 0;
}

static int status_error(int status, const struct mgmt_url *u, const char *vhost, const char *queue, char *err,
                        size_t errsz)
{
        if (status == 401)
                snprintf(err, errsz,
                         "the management API at %s:%s refused user '%s' (401): a wrong password, or a user "
                         "without the monitoring, management or administrator tag",
                         u->host, u->port, u->user);
        else if (status == 404)
                snprintf(err, errsz, "the management API at %s:%s knows no queue '%s' in vhost '%s' (404)", u->host,
                         u->port, queue, vhost);
        else
                snprintf(err, errsz, "the management API at %s:%s answered HTTP %d for queue '%s'", u->host, u->port,
                         status, queue);
        return -1;
}

int rmq_queue_retention_ms(const char *url, const char *ca_file, const char *vhost, const char *queue,
                           struct rmq_queue_ttl *ttl, char *err, size_t errsz)
{
        struct mgmt_url u;
        struct strbuf path = {0};
        struct http_reply r = {0};
        int rc = -1;
        if (parse_url(url, &u, err, errsz))
                return -1;
        strbuf_adds(&path, u.prefix);
        strbuf_adds(&path, "/api/queues/");
        pct_encode(&path, vhost);
        strbuf_adds(&path, "/");
        pct_encode(&path, queue);
        struct http_target t = {u.host, u.port, u.tls, ca_file};
        if (http_get(&t, path.p, u.auth, RMQ_MANAGEMENT_TIMEOUT_MS, &r, err, errsz))
                goto out;
        if (r.status != 200)
                status_error(r.status, &u, vhost, queue, err, errsz);
        else
                rc = read_queue(r.body, r.body_len, ttl, err, errsz);
out:
        free(path.p);
        http_reply_free(&r);
        return rc;
}
