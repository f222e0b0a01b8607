/* connection: the one place AMQP connections are opened from the config — the URL, TLS, login, heartbeat, and what a broker's refusal says. */
#include "source/rabbitmq/connection.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include "base/mem.h"
#include "source/rabbitmq/settings.h"

#define RMQ_FRAME_MAX 131072

const char *rmq_str(amqp_bytes_t b, char *buf, size_t bufsz)
{
        size_t n = b.len < bufsz - 1 ? b.len : bufsz - 1;
        if (n)
                memcpy(buf, b.bytes, n);
        buf[n] = '\0';
        return buf;
}

/* rabbitmq.url split; info points into *copy (free it). */
static int parse(const char *url, struct amqp_connection_info *info, char **copy)
{
        *copy = xstrdup(url ? url : "");
        amqp_default_connection_info(info);
        return amqp_parse_url(*copy, info) == AMQP_STATUS_OK ? 0 : -1;
}

int rmq_url_check(const char *url, char *err, size_t errsz)
{
        struct amqp_connection_info info;
        char *copy;
        int rc = parse(url, &info, &copy);
        free(copy);
        if (rc)
                snprintf(err, errsz, "not an AMQP URL (amqp://user:password@host:port/vhost or amqps://...)");
        return rc;
}

const char *rmq_target(const struct config *cfg, char *buf, size_t bufsz)
{
        struct amqp_connection_info info;
        char *copy;
        if (parse(rmq_conf(cfg)->url, &info, &copy))
                snprintf(buf, bufsz, "(rabbitmq.url does not parse)");
        else
                snprintf(buf, bufsz, "%s://%s:%d vhost %s", info.ssl ? "amqps" : "amqp", info.host, info.port,
                         info.vhost);
        free(copy);
        return buf;
}

const char *rmq_vhost(const struct config *cfg, char *buf, size_t bufsz)
{
        struct amqp_connection_info info;
        char *copy;
        snprintf(buf, bufsz, "%s", parse(rmq_conf(cfg)->url, &info, &copy) ? "/" : info.vhost);
        free(copy);
        return buf;
}

int rmq_reply(amqp_rpc_reply_t r, const char *what, int *code, char *err, size_t errsz)
{
        char text[256];
        if (code)
                *code = 0;
        switch (r.reply_type) {
        case AMQP_RESPONSE_NORMAL: return 0;
        case AMQP_RESPONSE_NONE: snprintf(err, errsz, "%s: no reply from the broker", what); return -1;
        case AMQP_RESPONSE_LIBRARY_EXCEPTION:
                snprintf(err, errsz, "%s: %s", what, amqp_error_string2(r.library_error));
                return -1;
        case AMQP_RESPONSE_SERVER_EXCEPTION: break;
        }
        if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
                const amqp_connection_close_t *m = r.reply.decoded;
                if (code)
                        *code = m->reply_code;
                snprintf(err, errsz, "%s: the broker closed the connection: %u %s", what, m->reply_code,
                         rmq_str(m->reply_text, text, sizeof(text)));
        } else if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
                const amqp_channel_close_t *m = r.reply.decoded;
                if (code)
                        *code = m->reply_code;
                snprintf(err, errsz, "%s: the broker closed the channel: %u %s", what, m->reply_code,
                         rmq_str(m->reply_text, text, sizeof(text)));
        } else {
                snprintf(err, errsz, "%s: unexpected answer from the broker (method 0x%08X)", what, r.reply.id);
        }
        return -1;
}

int rmq_check(amqp_connection_state_t conn, const char *what, int *code, char *err, size_t errsz)
{
        return rmq_reply(amqp_get_rpc_reply(conn), what, code, err, errsz);
}

static amqp_socket_t *new_socket(const struct config *cfg, amqp_connection_state_t conn, int ssl, char *err,
                                 size_t errsz)
{
        amqp_socket_t *sock = ssl ? amqp_ssl_socket_new(conn) : amqp_tcp_socket_new(conn);
        if (!sock) {
                snprintf(err, errsz, "cannot create a%s socket", ssl ? " TLS" : "");
                return NULL;
        }
        if (!ssl)
                return sock;
        amqp_ssl_socket_set_verify_peer(sock, 1);
        amqp_ssl_socket_set_verify_hostname(sock, 1);
        if (rmq_conf(cfg)->ca_file && *rmq_conf(cfg)->ca_file &&
            amqp_ssl_socket_set_cacert(sock, rmq_conf(cfg)->ca_file)) {
                snprintf(err, errsz, "rabbitmq.ca_file %s: cannot be read as PEM certificates", rmq_conf(cfg)->ca_file);
                return NULL;
        }
        return sock;
}

/* The broker cancels a consumer whose queue is deleted only for a client
 * that says it understands basic.cancel; the connection's name shows who
 * it is in the broker's tools. */
static amqp_rpc_reply_t login(amqp_connection_state_t conn, const struct config *cfg,
                              const struct amqp_connection_info *info, int heartbeat_s)
{
        char name[256];
        snprintf(name, sizeof(name), "dedupd %s", cfg->namespace);
        amqp_table_entry_t caps[] = {
                {amqp_cstring_bytes("consumer_cancel_notify"), {.kind = AMQP_FIELD_KIND_BOOLEAN, .value.boolean = 1}}};
        amqp_table_entry_t props[] = {
                {amqp_cstring_bytes("capabilities"), {.kind = AMQP_FIELD_KIND_TABLE, .value.table = {1, caps}}},
                {amqp_cstring_bytes("connection_name"),
                 {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = amqp_cstring_bytes(name)}},
        };
        amqp_table_t t = {2, props};
        return amqp_login_with_properties(conn, info->vhost, 0, RMQ_FRAME_MAX, heartbeat_s, &t, AMQP_SASL_METHOD_PLAIN,
                                          info->user, info->password);
}

amqp_connection_state_t rmq_connect(const struct config *cfg, int heartbeat_s, char *err, size_t errsz)
{
        struct amqp_connection_info info;
        struct timeval tv = {RMQ_TIMEOUT_MS / 1000, 0};
        char *copy, target[300], why[512];
        amqp_connection_state_t conn = NULL;
        amqp_socket_t *sock;
        int st;

        rmq_target(cfg, target, sizeof(target));
        if (parse(rmq_conf(cfg)->url, &info, &copy)) {
                snprintf(err, errsz, "rabbitmq.url: not an AMQP URL");
                goto error;
        }
        conn = amqp_new_connection();
        if (!(sock = new_socket(cfg, conn, info.ssl, why, sizeof(why)))) {
                snprintf(err, errsz, "%s: %s", target, why);
                goto error;
        }
        errno = 0;
        if ((st = amqp_socket_open_noblock(sock, info.host, info.port, &tv)) != AMQP_STATUS_OK) {
                int e = errno;
                snprintf(err, errsz, "%s: %s%s%s", target, amqp_error_string2(st),
                         st == AMQP_STATUS_SOCKET_ERROR && e ? ": " : "",
                         st == AMQP_STATUS_SOCKET_ERROR && e ? strerror(e) : "");
                goto error;
        }
        amqp_set_handshake_timeout(conn, &tv);
        amqp_set_rpc_timeout(conn, &tv);
        /* The password goes to the broker only; what it answers names the user at most. */
        if (rmq_reply(login(conn, cfg, &info, heartbeat_s), "login", NULL, why, sizeof(why))) {
                snprintf(err, errsz, "%s as user %s: %s", target, info.user, why);
                goto error;
        }
        free(copy);
        return conn;
error:
        free(copy);
        if (conn)
                amqp_destroy_connection(conn);
        return NULL;
}

void rmq_disconnect(amqp_connection_state_t conn)
{
        if (!conn)
                return;
        amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
        amqp_destroy_connection(conn);
}

int rmq_channel_open(amqp_connection_state_t conn, amqp_channel_t ch, char *err, size_t errsz)
{
        amqp_channel_open(conn, ch);
        return rmq_check(conn, "channel.open", NULL, err, errsz);
}
