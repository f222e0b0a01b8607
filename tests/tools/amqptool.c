/* amqptool: the tests' own AMQP client — read a message with its headers and properties, publish with properties set. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>

static void die(const char *what)
{
        fprintf(stderr, "amqptool: %s\n", what);
        exit(1);
}

static void ok(amqp_rpc_reply_t r, const char *what)
{
        if (r.reply_type != AMQP_RESPONSE_NORMAL)
                die(what);
}

static amqp_connection_state_t open_conn(void)
{
        const char *url = getenv("RABBITMQ_URL");
        struct amqp_connection_info info;
        if (!url)
                die("RABBITMQ_URL is not set");
        char *copy = strdup(url);
        amqp_default_connection_info(&info);
        if (amqp_parse_url(copy, &info))
                die("RABBITMQ_URL does not parse");
        amqp_connection_state_t c = amqp_new_connection();
        amqp_socket_t *s = amqp_tcp_socket_new(c);
        if (!s || amqp_socket_open(s, info.host, info.port))
                die("cannot connect");
        ok(amqp_login(c, info.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user, info.password), "login");
        free(copy); /* info pointed into it */
        amqp_channel_open(c, 1);
        ok(amqp_get_rpc_reply(c), "channel.open");
        return c;
}

static void print_bytes(const char *label, amqp_bytes_t b)
{
        printf("%s%.*s\n", label, (int)b.len, (const char *)b.bytes);
}

static void print_table(const amqp_table_t *t)
{
        for (int i = 0; i < t->num_entries; i++) {
                const amqp_table_entry_t *e = &t->entries[i];
                printf("header %.*s=", (int)e->key.len, (const char *)e->key.bytes);
                switch (e->value.kind) {
                case AMQP_FIELD_KIND_UTF8:
                case AMQP_FIELD_KIND_BYTES:
                        printf("%.*s\n", (int)e->value.value.bytes.len, (const char *)e->value.value.bytes.bytes);
                        break;
                case AMQP_FIELD_KIND_I64: printf("%lld\n", (long long)e->value.value.i64); break;
                case AMQP_FIELD_KIND_I32: printf("%d\n", e->value.value.i32); break;
                default: printf("(kind %c)\n", e->value.kind); break;
                }
        }
}

/* get QUEUE: one message, acknowledged; its properties, headers and body; exit 2 when the queue is empty. */
static int get(const char *queue)
{
        amqp_connection_state_t c = open_conn();
        amqp_rpc_reply_t r = amqp_basic_get(c, 1, amqp_cstring_bytes(queue), 1);
        ok(r, "basic.get");
        if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD) {
                amqp_connection_close(c, AMQP_REPLY_SUCCESS);
                amqp_destroy_connection(c);
                return 2;
        }
        amqp_message_t m;
        ok(amqp_read_message(c, 1, &m, 0), "reading the message");
        const amqp_basic_properties_t *p = &m.properties;
        if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
                print_bytes("message_id ", p->message_id);
        if (p->_flags & AMQP_BASIC_CORRELATION_ID_FLAG)
                print_bytes("correlation_id ", p->correlation_id);
        if (p->_flags & AMQP_BASIC_CONTENT_TYPE_FLAG)
                print_bytes("content_type ", p->content_type);
        if (p->_flags & AMQP_BASIC_HEADERS_FLAG)
                print_table(&p->headers);
        print_bytes("body ", m.body);
        amqp_destroy_message(&m);
        amqp_connection_close(c, AMQP_REPLY_SUCCESS);
        amqp_destroy_connection(c);
        return 0;
}

/* publish QUEUE: each stdin line "MESSAGE_ID<TAB>BODY" one persistent message with that message_id. */
static int publish(const char *queue)
{
        amqp_connection_state_t c = open_conn();
        char line[65536];
        amqp_confirm_select(c, 1);
        ok(amqp_get_rpc_reply(c), "confirm.select");
        while (fgets(line, sizeof(line), stdin)) {
                line[strcspn(line, "\n")] = '\0';
                char *tab = strchr(line, '\t');
                if (!tab)
                        die("a line without a tab");
                *tab = '\0';
                amqp_basic_properties_t p = {._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG,
                                             .delivery_mode = 2,
                                             .message_id = amqp_cstring_bytes(line)};
                if (amqp_basic_publish(c, 1, amqp_empty_bytes, amqp_cstring_bytes(queue), 0, 0, &p,
                                       amqp_cstring_bytes(tab + 1)))
                        die("basic.publish");
        }
        amqp_connection_close(c, AMQP_REPLY_SUCCESS); /* the broker has everything published before close-ok */
        amqp_destroy_connection(c);
        return 0;
}

int main(int argc, char **argv)
{
        if (argc == 3 && !strcmp(argv[1], "get"))
                return get(argv[2]);
        if (argc == 3 && !strcmp(argv[1], "publish"))
                return publish(argv[2]);
        fprintf(stderr, "usage: amqptool get QUEUE | publish QUEUE < lines (MESSAGE_ID<TAB>BODY)\n");
        return 2;
}
