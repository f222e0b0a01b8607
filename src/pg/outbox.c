/* outbox: the relay's statements on dedupd.outbox — a message written in the effect's transaction, taken, and settled row by row as the broker answered. */
#include "pg/outbox.h"

#include "base/mem.h"
#include "pg/array.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static void hex_element(struct store_array *a, const void *data, size_t len)
{
        static const char digits[] = "0123456789abcdef";
        char *h = xmalloc(2 * len + 3);
        h[0] = '\\';
        h[1] = 'x';
        for (size_t i = 0; i < len; i++) {
                h[2 + 2 * i] = digits[((const unsigned char *)data)[i] >> 4];
                h[3 + 2 * i] = digits[((const unsigned char *)data)[i] & 15];
        }
        h[2 + 2 * len] = '\0';
        store_array_text(a, h);
        free(h);
}

enum store_rc store_outbox_insert(struct store *s, const char *ns, const struct outbox_msg *m, char *err, size_t errsz)
{
        struct store_array names = {0}, values = {0};
        enum store_rc rc;

        for (size_t i = 0; i < m->rec.header_cnt; i++) {
                store_array_text(&names, m->rec.headers[i].name);
                if (m->rec.headers[i].value)
                        hex_element(&values, m->rec.headers[i].value, m->rec.headers[i].value_len);
                else
                        store_array_text(&values, NULL);
        }
        char msg_id[MSGID_LEN + 1];
        if (m->idem_key)
                msgid_derive(ns, m->idem_key, &m->place, msg_id);
        const char *params[8] = {ns,
                                 m->idem_key,
                                 m->rec.topic,
                                 m->rec.key,
                                 m->rec.value,
                                 store_array_finish(&names),
                                 store_array_finish(&values),
                                 m->idem_key ? msg_id : NULL};
        const int lengths[8] = {0, 0, 0, (int)m->rec.key_len, (int)m->rec.value_len, 0, 0, 0};
        const int formats[8] = {0, 0, 0, 1, 1, 0, 0, 0}; /* key and value go as binary bytea */
        rc = store_query_binary(s,
                                "INSERT INTO dedupd.outbox (namespace, idem_key, topic, key, value,"
                                " header_names, header_values, msg_id)"
                                " VALUES ($1, $2, $3, $4::bytea, $5::bytea, $6::text[], $7::bytea[], $8)",
                                8, params, lengths, formats, NULL, err, errsz);
        store_array_free(&names);
        store_array_free(&values);
        return rc;
}

static unsigned char *unhex(const char *hex, size_t *len)
{
        size_t n = strlen(hex) / 2;
        unsigned char *out = xmalloc(n ? n : 1);
        for (size_t i = 0; i < n; i++) {
                unsigned v;
                sscanf(hex + 2 * i, "%2x", &v);
                out[i] = (unsigned char)v;
        }
        *len = n;
        return out;
}

/* The identity row w goes out with: its msg_id, checked again here (the
 * column's CHECK says the same); a row without one (written before schema
 * migration 10, or by hand) keeps the one it always had, its sequence id. */
static void identity(const PGresult *r, int i, struct outbox_row *w)
{
        const char *id = PQgetisnull(r, i, 9) ? NULL : PQgetvalue(r, i, 9);
        if (id && msgid_valid(id))
                snprintf(w->msg_id, sizeof(w->msg_id), "%s", id);
        else
                snprintf(w->msg_id, sizeof(w->msg_id), "%" PRId64, w->id);
}

/* Row i of the result into w. */
static void decode(const PGresult *r, int i, struct outbox_row *w)
{
        json_error_t je;
        w->id = strtoll(PQgetvalue(r, i, 0), NULL, 10);
        identity(r, i, w);
        w->topic_buf = xstrdup(PQgetvalue(r, i, 1));
        w->idem_key_buf = PQgetisnull(r, i, 8) ? NULL : xstrdup(PQgetvalue(r, i, 8));
        w->msg.rec.topic = w->topic_buf;
        w->msg.idem_key = w->idem_key_buf;
        if (strcmp(PQgetvalue(r, i, 3), "t"))
                w->msg.rec.key = w->key_buf = unhex(PQgetvalue(r, i, 2), &w->msg.rec.key_len);
        if (strcmp(PQgetvalue(r, i, 5), "t"))
                w->msg.rec.value = w->value_buf = unhex(PQgetvalue(r, i, 4), &w->msg.rec.value_len);
        json_t *names = json_loads(PQgetvalue(r, i, 6), 0, &je);
        json_t *values = json_loads(PQgetvalue(r, i, 7), 0, &je);
        size_t hn = json_array_size(names);
        w->header_buf = xcalloc(hn ? hn : 1, sizeof(*w->header_buf));
        w->header_values = xcalloc(hn ? hn : 1, sizeof(*w->header_values));
        for (size_t k = 0; k < hn; k++) {
                json_t *v = json_array_get(values, k);
                size_t vl = 0;
                w->header_values[k] = json_is_string(v) ? unhex(json_string_value(v), &vl) : NULL;
                w->header_buf[k] = (struct dedupd_header){xstrdup(json_string_value(json_array_get(names, k))),
                                                          w->header_values[k], vl};
        }
        w->msg.rec.headers = w->header_buf;
        w->msg.rec.header_cnt = hn;
        json_decref(names);
        json_decref(values);
}

enum store_rc store_outbox_take(struct store *s, const char *ns, int limit, struct outbox_row **rows, size_t *n,
                                char *err, size_t errsz)
{
        char lim[16];
        const char *params[2] = {ns, lim};
        PGresult *r = NULL;
        enum store_rc rc;

        *rows = NULL;
        *n = 0;
        snprintf(lim, sizeof(lim), "%d", limit);
        rc = store_query(s,
                         "SELECT id, topic, encode(key, 'hex'), key IS NULL, encode(value, 'hex'),"
                         " value IS NULL, array_to_json(header_names),"
                         " (SELECT coalesce(json_agg(encode(v, 'hex')), '[]') FROM unnest(header_values) v),"
                         " idem_key, msg_id"
                         " FROM dedupd.outbox WHERE namespace = $1 AND sent_at IS NULL AND given_up_at IS NULL"
                         " AND (retry_at IS NULL OR retry_at <= now())"
                         " ORDER BY id LIMIT $2::int FOR UPDATE SKIP LOCKED",
                         2, params, &r, err, errsz);
        if (rc)
                return rc;
        *n = (size_t)PQntuples(r);
        *rows = xcalloc(*n ? *n : 1, sizeof(**rows));
        for (size_t i = 0; i < *n; i++)
                decode(r, (int)i, &(*rows)[i]);
        PQclear(r);
        return STORE_OK;
}

/* $1 ids, $2 reasons (NULL: sent), $3 first backoff (ms), $4 longest, $5
 * failures that give a row up. In SET, o.failures is the count before this
 * failure; in RETURNING, after it. */
static const char *const sql_settle =
        "UPDATE dedupd.outbox o SET"
        " sent_at = CASE WHEN u.reason IS NULL THEN now() END,"
        " failures = o.failures + CASE WHEN u.reason IS NULL THEN 0 ELSE 1 END,"
        " last_error = coalesce(u.reason, o.last_error),"
        " retry_at = CASE WHEN u.reason IS NOT NULL AND o.failures + 1 < $5::int"
        "   THEN now() + least($3::float8 * power(2, least(o.failures, 40)), $4::float8)"
        "     * interval '1 millisecond' END,"
        " given_up_at = CASE WHEN u.reason IS NOT NULL AND o.failures + 1 >= $5::int THEN now() END"
        " FROM unnest($1::bigint[], $2::text[]) AS u(id, reason)"
        " WHERE o.id = u.id"
        " RETURNING o.id, o.failures, o.given_up_at IS NOT NULL, u.reason IS NOT NULL";

enum store_rc store_outbox_settle(struct store *s, const struct outbox_answer *answers, size_t n,
                                  const struct outbox_retry *rp, struct outbox_failure **failed, size_t *nfailed,
                                  char *err, size_t errsz)
{
        struct store_array ids = {0}, reasons = {0};
        char first[24], longest[24], max[16];
        PGresult *r = NULL;

        *failed = NULL;
        *nfailed = 0;
        for (size_t i = 0; i < n; i++) {
                store_array_int(&ids, answers[i].id);
                store_array_text(&reasons, answers[i].error);
        }
        snprintf(first, sizeof(first), "%d", rp->backoff_ms);
        snprintf(longest, sizeof(longest), "%d", rp->backoff_max_ms);
        snprintf(max, sizeof(max), "%d", rp->max_failures);
        const char *params[5] = {store_array_finish(&ids), store_array_finish(&reasons), first, longest, max};
        enum store_rc rc = store_query(s, sql_settle, 5, params, &r, err, errsz);
        store_array_free(&ids);
        store_array_free(&reasons);
        if (rc)
                return rc;
        *failed = xcalloc((size_t)PQntuples(r) + 1, sizeof(**failed));
        for (int i = 0; i < PQntuples(r); i++) {
                if (strcmp(PQgetvalue(r, i, 3), "t"))
                        continue; /* sent */
                struct outbox_failure *f = &(*failed)[(*nfailed)++];
                f->id = strtoll(PQgetvalue(r, i, 0), NULL, 10);
                f->failures = atoi(PQgetvalue(r, i, 1));
                f->given_up = !strcmp(PQgetvalue(r, i, 2), "t");
        }
        PQclear(r);
        return STORE_OK;
}

void store_outbox_rows_free(struct outbox_row *rows, size_t n)
{
        for (size_t i = 0; rows && i < n; i++) {
                for (size_t k = 0; k < rows[i].msg.rec.header_cnt; k++) {
                        free((void *)rows[i].header_buf[k].name);
                        free(rows[i].header_values[k]);
                }
                free(rows[i].header_buf);
                free(rows[i].header_values);
                free(rows[i].key_buf);
                free(rows[i].value_buf);
                free(rows[i].topic_buf);
                free(rows[i].idem_key_buf);
        }
        free(rows);
}
