/* management: the RabbitMQ management plugin's HTTP API through libcurl, for what AMQP does not show — a queue's message TTL, from its arguments and its effective policy. */
#include "source/rabbitmq/management.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "base/strbuf.h"

/* Answers larger than this are refused (a queue object is a few kB). */
#define MGMT_REPLY_MAX (1024 * 1024)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_ready = CURLE_FAILED_INIT;

/* libcurl's global state (and the TLS library's under it), set up before
 * the first handle and given back at exit, when no handle is left. */
static void curl_start(void)
{
        curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT);
        if (curl_ready == CURLE_OK)
                atexit(curl_global_cleanup);
}

/* One GET of a queue: where (the URL, and the same without its password,
 * all a message may name), who asks, and what came back. */
struct mgmt_get {
        char *url;      /* for CURLOPT_URL: holds the password */
        char *shown;    /* the URL without its password */
        char *user;     /* decoded, NULL without a login */
        char *password; /* decoded, NULL without one: to keep it out of curl's words too */
        struct strbuf body;
        int too_large;
        long status;
};

static void mgmt_get_free(struct mgmt_get *g)
{
        curl_free(g->url);
        curl_free(g->shown);
        curl_free(g->user);
        curl_free(g->password);
        free(g->body.p);
}

/* The answer's body, refused past MGMT_REPLY_MAX (curl then fails the transfer). */
static size_t keep_body(char *data, size_t size, size_t n, void *arg)
{
        struct mgmt_get *g = arg;
        size_t len = size * n; /* size is 1, as curl documents */
        if (g->body.len + len > MGMT_REPLY_MAX) {
                g->too_large = 1;
                return 0;
        }
        strbuf_add(&g->body, data, len);
        return len;
}

/* base's path (its prefix, trailing "/" dropped) + "/api/queues/VHOST/QUEUE",
 * both %-encoded by curl ("/" is vhost "%2F"). */
static int set_queue_path(CURL *h, CURLU *u, const char *vhost, const char *queue)
{
        char *prefix = NULL, *v = curl_easy_escape(h, vhost, 0), *q = curl_easy_escape(h, queue, 0);
        struct strbuf path = {0};
        int rc = -1;
        if (v && q && curl_url_get(u, CURLUPART_PATH, &prefix, 0) == CURLUE_OK) {
                size_t n = strlen(prefix);
                while (n && prefix[n - 1] == '/')
                        n--;
                strbuf_add(&path, prefix, n);
                strbuf_adds(&path, "/api/queues/");
                strbuf_adds(&path, v);
                strbuf_adds(&path, "/");
                strbuf_adds(&path, q);
                rc = curl_url_set(u, CURLUPART_PATH, path.p, 0) == CURLUE_OK ? 0 : -1;
        }
        curl_free(prefix);
        curl_free(v);
        curl_free(q);
        free(path.p);
        return rc;
}

/* The URL as curl will ask it, and as a message may name it (its password removed). */
static int take_urls(CURLU *u, struct mgmt_get *g)
{
        CURLU *shown = curl_url_dup(u);
        int rc = -1;
        curl_url_get(u, CURLUPART_USER, &g->user, CURLU_URLDECODE);
        curl_url_get(u, CURLUPART_PASSWORD, &g->password, CURLU_URLDECODE);
        if (shown && curl_url_set(shown, CURLUPART_PASSWORD, NULL, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_URL, &g->url, 0) == CURLUE_OK &&
            curl_url_get(shown, CURLUPART_URL, &g->shown, 0) == CURLUE_OK)
                rc = 0;
        curl_url_cleanup(shown);
        return rc;
}

/* url's base (http[s]://user:password@host:port[/prefix]) to this queue's
 * API path: 0, or -1 with why (never the URL: it holds the password). */
static int build_urls(CURL *h, const char *url, const char *vhost, const char *queue, struct mgmt_get *g, char *err,
                      size_t errsz)
{
        CURLU *u = curl_url();
        CURLUcode uc = u ? curl_url_set(u, CURLUPART_URL, url, 0) : CURLUE_OUT_OF_MEMORY;
        int rc = -1;
        if (uc != CURLUE_OK)
                snprintf(err, errsz, "rabbitmq.management_url is not an http[s]://user:password@host:port URL: %s",
                         curl_url_strerror(uc));
        else if (set_queue_path(h, u, vhost, queue) || take_urls(u, g))
                snprintf(err, errsz, "rabbitmq.management_url: cannot build the URL of queue '%s'", queue);
        else
                rc = 0;
        curl_url_cleanup(u);
        return rc;
}

/* A GET of g->url, within RMQ_MANAGEMENT_TIMEOUT_MS, http or https only, no redirect followed. */
static void set_options(CURL *h, struct mgmt_get *g, const char *ca_file, char *errbuf)
{
        curl_easy_setopt(h, CURLOPT_URL, g->url);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)RMQ_MANAGEMENT_TIMEOUT_MS);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, g);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
        if (ca_file && *ca_file)
                curl_easy_setopt(h, CURLOPT_CAINFO, ca_file);
}

/* Why the transfer failed, in curl's words (its error buffer, else its
 * code's), the URL named without the password. */
static void transfer_error(const struct mgmt_get *g, CURLcode rc, const char *errbuf, char *err, size_t errsz)
{
        const char *why = *errbuf ? errbuf : curl_easy_strerror(rc);
        if (g->too_large)
                why = "the answer is larger than 1 MB";
        else if (g->password && *g->password && strstr(why, g->password))
                why = curl_easy_strerror(rc);
        snprintf(err, errsz, "the management API at %s: %s", g->shown, why);
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
        json_t *q = json_loadb(body ? body : "", len, 0, &je);
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

static int status_error(const struct mgmt_get *g, const char *vhost, const char *queue, char *err, size_t errsz)
{
        if (g->status == 401)
                snprintf(err, errsz,
                         "the management API at %s refused user '%s' (401): a wrong password, or a user "
                         "without the monitoring, management or administrator tag or without access to vhost '%s'",
                         g->shown, g->user ? g->user : "", vhost);
        else if (g->status == 404)
                snprintf(err, errsz, "the management API at %s knows no queue '%s' in vhost '%s' (404)", g->shown,
                         queue, vhost);
        else
                snprintf(err, errsz, "the management API at %s answered HTTP %ld for queue '%s'", g->shown, g->status,
                         queue);
        return -1;
}

/* The GET itself, on h: 0 with g->status and g->body, or -1 with why. */
static int perform(CURL *h, struct mgmt_get *g, const char *ca_file, char *err, size_t errsz)
{
        char errbuf[CURL_ERROR_SIZE] = "";
        set_options(h, g, ca_file, errbuf);
        CURLcode rc = curl_easy_perform(h);
        if (rc != CURLE_OK) {
                transfer_error(g, rc, errbuf, err, errsz);
                return -1;
        }
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &g->status);
        return 0;
}

int rmq_queue_retention_ms(const char *url, const char *ca_file, const char *vhost, const char *queue,
                           struct rmq_queue_ttl *ttl, char *err, size_t errsz)
{
        struct mgmt_get g = {0};
        CURL *h = NULL;
        int rc = -1;
        pthread_once(&curl_once, curl_start);
        if (curl_ready != CURLE_OK || !(h = curl_easy_init())) {
                snprintf(err, errsz, "libcurl does not start: %s", curl_easy_strerror(curl_ready));
                return -1;
        }
        if (build_urls(h, url, vhost, queue, &g, err, errsz) || perform(h, &g, ca_file, err, errsz))
                goto out;
        if (g.status != 200)
                status_error(&g, vhost, queue, err, errsz);
        else
                rc = read_queue(g.body.p, g.body.len, ttl, err, errsz);
out:
        curl_easy_cleanup(h);
        mgmt_get_free(&g);
        return rc;
}
