/* link: the one NATS connection and JetStream context of a process — built from the nats: section, reconnecting for ever, errors in words. */
#include "source/nats/link.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "source/nats/settings.h"

const char *nats_link_redact(const char *url, char *buf, size_t bufsz)
{
        size_t o = 0;
        buf[0] = '\0';
        /* Each comma-separated URL on its own: scheme://[userinfo@]host */
        while (*url && o + 1 < bufsz) {
                const char *end = strchr(url, ',');
                size_t len = end ? (size_t)(end - url) : strlen(url);
                const char *scheme = strstr(url, "://");
                const char *host = url;
                if (scheme && (size_t)(scheme - url) < len)
                        host = scheme + 3;
                const char *at = memchr(host, '@', len - (size_t)(host - url));
                int n = at ? snprintf(buf + o, bufsz - o, "%s%.*s%.*s", o ? "," : "", (int)(host - url), url,
                                      (int)(len - (size_t)(at + 1 - url)), at + 1)
                           : snprintf(buf + o, bufsz - o, "%s%.*s", o ? "," : "", (int)len, url);
                if (n < 0 || (size_t)n >= bufsz - o)
                        break;
                o += (size_t)n;
                url += len;
                if (*url == ',')
                        url++;
        }
        return buf;
}

const char *nats_consumer_name(const struct config *cfg, size_t t, char *buf, size_t bufsz)
{
        char prefix[160];
        if (nats_conf(cfg)->durable && *nats_conf(cfg)->durable)
                snprintf(prefix, sizeof(prefix), "%s", nats_conf(cfg)->durable);
        else
                snprintf(prefix, sizeof(prefix), "dedupd-%s", cfg->namespace);
        snprintf(buf, bufsz, "%s-%s", prefix, cfg->topics[t].name);
        /* A consumer name may not hold . * > or white space. */
        for (char *p = buf; *p; p++)
                if (*p == '.' || *p == '*' || *p == '>' || *p == ' ' || *p == '\t')
                        *p = '_';
        return buf;
}

const char *nats_link_error(natsStatus s, jsErrCode jerr, char *buf, size_t bufsz)
{
        const char *last = nats_GetLastError(NULL);
        if (jerr)
                snprintf(buf, bufsz, "%s (JetStream error %d)%s%s", natsStatus_GetText(s), (int)jerr,
                         last && *last ? ": " : "", last ? last : "");
        else
                snprintf(buf, bufsz, "%s%s%s", natsStatus_GetText(s), last && *last ? ": " : "", last ? last : "");
        return buf;
}

int nats_link_unreachable(natsStatus s)
{
        return s == NATS_NO_SERVER || s == NATS_CONNECTION_CLOSED || s == NATS_CONNECTION_DISCONNECTED ||
               s == NATS_IO_ERROR || s == NATS_TIMEOUT || s == NATS_STALE_CONNECTION || s == NATS_NO_RESPONDERS ||
               s == NATS_SSL_ERROR;
}

/* What the callbacks name. They run on the client's threads, possibly
 * after the link that set them is gone: they touch nothing of it. */
static char callback_server[256];

static void on_disconnected(natsConnection *nc, void *closure)
{
        (void)closure;
        if (natsConnection_Status(nc) != NATS_CONN_STATUS_CLOSED) /* closed on purpose: not news */
                log_warn("nats", "disconnected from %s; reconnecting (acks and publishes wait)", callback_server);
}

static void on_reconnected(natsConnection *nc, void *closure)
{
        (void)nc;
        (void)closure;
        log_info("nats", "reconnected to %s", callback_server);
}

static void on_error(natsConnection *nc, natsSubscription *sub, natsStatus s, void *closure)
{
        (void)nc;
        (void)sub;
        (void)closure;
        log_warn("nats", "asynchronous error: %s", natsStatus_GetText(s));
}

/* The options of the nats: section. */
static natsStatus options(natsOptions **o, const struct config *cfg)
{
        natsStatus s = natsOptions_Create(o);
        if (s == NATS_OK)
                s = natsOptions_SetURL(*o, nats_conf(cfg)->url);
        if (s == NATS_OK)
                s = natsOptions_SetMaxReconnect(*o, -1); /* for ever: the runner waits, nothing is lost */
        if (s == NATS_OK)
                s = natsOptions_SetReconnectWait(*o, 500);
        if (s == NATS_OK)
                s = natsOptions_SetTimeout(*o, NATS_TIMEOUT_MS);
        if (s == NATS_OK && nats_conf(cfg)->token && *nats_conf(cfg)->token)
                s = natsOptions_SetToken(*o, nats_conf(cfg)->token);
        if (s == NATS_OK && nats_conf(cfg)->creds_file && *nats_conf(cfg)->creds_file)
                s = natsOptions_SetUserCredentialsFromFiles(*o, nats_conf(cfg)->creds_file, NULL);
        if (s == NATS_OK && nats_conf(cfg)->tls_ca && *nats_conf(cfg)->tls_ca) {
                s = natsOptions_SetSecure(*o, true);
                if (s == NATS_OK)
                        s = natsOptions_LoadCATrustedCertificates(*o, nats_conf(cfg)->tls_ca);
        }
        if (s == NATS_OK)
                s = natsOptions_SetDisconnectedCB(*o, on_disconnected, NULL);
        if (s == NATS_OK)
                s = natsOptions_SetReconnectedCB(*o, on_reconnected, NULL);
        if (s == NATS_OK)
                s = natsOptions_SetErrorHandler(*o, on_error, NULL);
        return s;
}

/* Whether text holds the token or any user:password of the URLs. */
static int holds_secret(const char *text, const struct config *cfg)
{
        if (nats_conf(cfg)->token && *nats_conf(cfg)->token && strstr(text, nats_conf(cfg)->token))
                return 1;
        for (const char *url = nats_conf(cfg)->url; url && *url;) {
                const char *end = strchr(url, ',');
                size_t len = end ? (size_t)(end - url) : strlen(url);
                const char *scheme = strstr(url, "://");
                const char *user = scheme && (size_t)(scheme - url) < len ? scheme + 3 : url;
                const char *at = memchr(user, '@', len - (size_t)(user - url));
                if (at && at > user) {
                        /* the whole userinfo, and its password alone */
                        const char *colon = memchr(user, ':', (size_t)(at - user));
                        char part[512];
                        snprintf(part, sizeof(part), "%.*s", (int)(at - user), user);
                        if (strstr(text, part))
                                return 1;
                        if (colon && colon + 1 < at) {
                                snprintf(part, sizeof(part), "%.*s", (int)(at - colon - 1), colon + 1);
                                if (strstr(text, part))
                                        return 1;
                        }
                }
                url += len;
                if (*url == ',')
                        url++;
        }
        return 0;
}

int nats_link_open(struct nats_link *l, const struct config *cfg, char *err, size_t errsz)
{
        natsOptions *o = NULL;
        jsOptions jo;
        char why[512];
        memset(l, 0, sizeof(*l));
        nats_link_redact(nats_conf(cfg)->url, l->server, sizeof(l->server));
        snprintf(callback_server, sizeof(callback_server), "%s", l->server);
        natsStatus s = options(&o, cfg);
        if (s == NATS_OK)
                s = natsConnection_Connect(&l->nc, o);
        natsOptions_Destroy(o);
        if (s != NATS_OK) {
                /* The client's last error says which check failed (the TLS
                 * handshake's reason, the server's -ERR); it may quote the URL:
                 * said only when it holds no credential of the config. */
                const char *last = nats_GetLastError(NULL);
                if (last && *last && !holds_secret(last, cfg))
                        snprintf(err, errsz, "cannot connect to NATS at %s: %s: %s", l->server, natsStatus_GetText(s),
                                 last);
                else
                        snprintf(err, errsz, "cannot connect to NATS at %s: %s", l->server, natsStatus_GetText(s));
                return -1;
        }
        jsOptions_Init(&jo);
        jo.Wait = NATS_TIMEOUT_MS;
        if ((s = natsConnection_JetStream(&l->js, l->nc, &jo)) != NATS_OK) {
                snprintf(err, errsz, "JetStream context: %s", nats_link_error(s, 0, why, sizeof(why)));
                nats_link_close(l);
                return -1;
        }
        return 0;
}

void nats_link_close(struct nats_link *l)
{
        if (l->js)
                jsCtx_Destroy(l->js);
        if (l->nc) {
                natsConnection_FlushTimeout(l->nc, 2000); /* acks on their way */
                natsConnection_Close(l->nc);
                natsConnection_Destroy(l->nc);
        }
        l->js = NULL;
        l->nc = NULL;
}
