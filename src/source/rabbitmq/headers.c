/* headers: AMQP headers and properties as dedupd's name/value pairs, and back — what keys read, what dead letters and the outbox carry. */
#include "source/rabbitmq/headers.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

void rmq_strings_free(struct rmq_strings *s)
{
        for (size_t i = 0; i < s->cnt; i++)
                free(s->v[i]);
        free(s->v);
        s->v = NULL;
        s->cnt = 0;
}

static const char *keep_bytes(struct rmq_strings *s, const void *p, size_t n)
{
        char *c = xmalloc(n + 1);
        if (n)
                memcpy(c, p, n);
        c[n] = '\0';
        s->v = xrealloc(s->v, (s->cnt + 1) * sizeof(*s->v));
        s->v[s->cnt++] = c;
        return c;
}

/* A scalar field value as text, or 0 for one left out. */
static int value_text(const amqp_field_value_t *v, char *buf, size_t bufsz, const void **p, size_t *n)
{
        switch (v->kind) {
        case AMQP_FIELD_KIND_UTF8:
        case AMQP_FIELD_KIND_BYTES:
                *p = v->value.bytes.bytes;
                *n = v->value.bytes.len;
                return 1;
        case AMQP_FIELD_KIND_BOOLEAN: snprintf(buf, bufsz, "%s", v->value.boolean ? "true" : "false"); break;
        case AMQP_FIELD_KIND_I8: snprintf(buf, bufsz, "%d", v->value.i8); break;
        case AMQP_FIELD_KIND_U8: snprintf(buf, bufsz, "%u", v->value.u8); break;
        case AMQP_FIELD_KIND_I16: snprintf(buf, bufsz, "%d", v->value.i16); break;
        case AMQP_FIELD_KIND_U16: snprintf(buf, bufsz, "%u", v->value.u16); break;
        case AMQP_FIELD_KIND_I32: snprintf(buf, bufsz, "%" PRId32, v->value.i32); break;
        case AMQP_FIELD_KIND_U32: snprintf(buf, bufsz, "%" PRIu32, v->value.u32); break;
        case AMQP_FIELD_KIND_I64: snprintf(buf, bufsz, "%" PRId64, v->value.i64); break;
        case AMQP_FIELD_KIND_U64:
        case AMQP_FIELD_KIND_TIMESTAMP: snprintf(buf, bufsz, "%" PRIu64, v->value.u64); break;
        default: return 0;
        }
        *p = buf;
        *n = strlen(buf);
        return 1;
}

size_t rmq_headers_read(const amqp_table_t *t, struct dedupd_header **out, struct rmq_strings *keep)
{
        size_t n = 0;
        *out = xcalloc(t->num_entries > 0 ? (size_t)t->num_entries : 1, sizeof(**out));
        for (int i = 0; i < t->num_entries; i++) {
                const amqp_table_entry_t *e = &t->entries[i];
                char num[32];
                const void *p;
                size_t len;
                if (!value_text(&e->value, num, sizeof(num), &p, &len))
                        continue;
                const char *name = keep_bytes(keep, e->key.bytes, e->key.len);
                (*out)[n++] = (struct dedupd_header){name, keep_bytes(keep, p, len), len};
        }
        return n;
}

size_t rmq_props_read(const amqp_basic_properties_t *p, struct dedupd_header **out, struct rmq_strings *keep)
{
        const struct {
                const char *name;
                amqp_flags_t flag;
                const amqp_bytes_t *v;
        } props[] = {
                {"message_id", AMQP_BASIC_MESSAGE_ID_FLAG, &p->message_id},
                {"correlation_id", AMQP_BASIC_CORRELATION_ID_FLAG, &p->correlation_id},
                {"type", AMQP_BASIC_TYPE_FLAG, &p->type},
                {"app_id", AMQP_BASIC_APP_ID_FLAG, &p->app_id},
                {"user_id", AMQP_BASIC_USER_ID_FLAG, &p->user_id},
                {"reply_to", AMQP_BASIC_REPLY_TO_FLAG, &p->reply_to},
        };
        size_t n = 0;
        *out = xcalloc(sizeof(props) / sizeof(*props), sizeof(**out));
        for (size_t i = 0; i < sizeof(props) / sizeof(*props); i++)
                if (p->_flags & props[i].flag)
                        (*out)[n++] = (struct dedupd_header){
                                props[i].name, keep_bytes(keep, props[i].v->bytes, props[i].v->len), props[i].v->len};
        return n;
}

amqp_table_t rmq_headers_table(const amqp_table_t *base, const struct dedupd_header *extra, size_t n, amqp_pool_t *pool)
{
        int have = base ? base->num_entries : 0;
        amqp_table_t t = {0, NULL};
        t.entries = amqp_pool_alloc(pool, ((size_t)have + n + 1) * sizeof(*t.entries));
        for (int i = 0; i < have; i++)
                t.entries[t.num_entries++] = base->entries[i];
        for (size_t i = 0; i < n; i++) {
                if (!extra[i].value)
                        continue;
                amqp_table_entry_t *e = &t.entries[t.num_entries++];
                e->key = amqp_cstring_bytes(extra[i].name);
                e->value.kind = AMQP_FIELD_KIND_UTF8;
                e->value.value.bytes = (amqp_bytes_t){extra[i].value_len, (void *)extra[i].value};
        }
        return t;
}
