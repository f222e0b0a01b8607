/* outbox: messages written in the handler's transaction, published by a relay after COMMIT. */
#include "outbox.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "log.h"
#include "producer.h"

static void hex_element(struct store_array *a, const void *data, size_t len)
{
        static const char digits[] = "0123456789abcdef";
        char *h = malloc(2 * len + 3);
        if (!h)
                abort();
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

int outbox_insert(PGconn *conn, const char *ns, const char *idem_key, const char *topic,
                  const void *key, size_t key_len, const void *value, size_t value_len,
                  const struct dedupd_header *headers, size_t header_cnt, char *err, size_t errsz)
{
        struct store_array names = {0}, values = {0};
        int rc = 0;

        for (size_t i = 0; i < header_cnt; i++) {
                store_array_text(&names, headers[i].name);
                if (headers[i].value)
                        hex_element(&values, headers[i].value, headers[i].value_len);
                else
                        store_array_text(&values, NULL);
        }
        const char *params[7] = {ns, idem_key, topic, key, value, store_array_finish(&names),
                                 store_array_finish(&values)};
        int lengths[7] = {0, 0, 0, (int)key_len, (int)value_len, 0, 0};
        int formats[7] = {0, 0, 0, 1, 1, 0, 0}; /* key and value go as binary bytea */
        PGresult *r = PQexecParams(conn,
                                   "INSERT INTO dedupd.outbox (namespace, idem_key, topic, key, value,"
                                   " header_names, header_values)"
                                   " VALUES ($1, $2, $3, $4::bytea, $5::bytea, $6::text[], $7::bytea[])",
                                   7, NULL, params, lengths, formats, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
                snprintf(err, errsz, "outbox insert: %s", PQerrorMessage(conn));
                rc = -1;
        }
        PQclear(r);
        store_array_free(&names);
        store_array_free(&values);
        return rc;
}

/* One fetched row, decoded. */
struct row {
        char *id;
        char *topic;
        unsigned char *key, *value;
        size_t key_len, value_len;
        int key_null, value_null;
        json_t *names, *values; /* JSON arrays: header names, hex values (null allowed) */
};

static unsigned char *unhex(const char *hex, size_t *len)
{
        size_t n = strlen(hex) / 2;
        unsigned char *out = malloc(n ? n : 1);
        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                unsigned v;
                sscanf(hex + 2 * i, "%2x", &v);
                out[i] = (unsigned char)v;
        }
        *len = n;
        return out;
}

int outbox_relay(struct store *s, struct producer *p, const char *ns, int batch, char *err,
                 size_t errsz)
{
        char lim[16];
        const char *params[2] = {ns, lim};
        PGresult *r = NULL;
        struct row *rows = NULL;
        struct producer_record *recs = NULL;
        struct dedupd_header **hdrs = NULL;
        int n = 0, ret = -1;
        enum store_rc rc;

        if (!store_ok(s)) {
                snprintf(err, errsz, "not connected");
                return -1;
        }
        snprintf(lim, sizeof(lim), "%d", batch);
        if ((rc = store_begin(s, err, errsz)))
                return -1;
        r = PQexecParams(s->conn,
                         "SELECT id, topic, encode(key, 'hex'), key IS NULL, encode(value, 'hex'),"
                         " value IS NULL, array_to_json(header_names),"
                         " (SELECT coalesce(json_agg(encode(v, 'hex')), '[]') FROM unnest(header_values) v),"
                         " idem_key"
                         " FROM dedupd.outbox WHERE namespace = $1 AND sent_at IS NULL"
                         " ORDER BY id LIMIT $2::int FOR UPDATE SKIP LOCKED",
                         2, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
                snprintf(err, errsz, "outbox read: %s", PQerrorMessage(s->conn));
                goto out;
        }
        n = PQntuples(r);
        if (n == 0) {
                ret = 0;
                goto out;
        }
        rows = calloc((size_t)n, sizeof(*rows));
        recs = calloc((size_t)n, sizeof(*recs));
        hdrs = calloc((size_t)n, sizeof(*hdrs));
        if (!rows || !recs || !hdrs) {
                snprintf(err, errsz, "out of memory");
                goto out;
        }
        struct store_array ids = {0};
        for (int i = 0; i < n; i++) {
                struct row *w = &rows[i];
                json_error_t je;
                w->id = PQgetvalue(r, i, 0);
                w->topic = PQgetvalue(r, i, 1);
                w->key_null = !strcmp(PQgetvalue(r, i, 3), "t");
                w->value_null = !strcmp(PQgetvalue(r, i, 5), "t");
                w->key = w->key_null ? NULL : unhex(PQgetvalue(r, i, 2), &w->key_len);
                w->value = w->value_null ? NULL : unhex(PQgetvalue(r, i, 4), &w->value_len);
                w->names = json_loads(PQgetvalue(r, i, 6), 0, &je);
                w->values = json_loads(PQgetvalue(r, i, 7), 0, &je);
                size_t hn = json_array_size(w->names);
                struct dedupd_header *h = calloc(hn + 2, sizeof(*h));
                hdrs[i] = h;
                size_t k = 0;
                for (; h && k < hn; k++) {
                        json_t *v = json_array_get(w->values, k);
                        size_t vl = 0;
                        /* decoded values live in the json string's buffer replacement below */
                        unsigned char *dec = json_is_string(v) ? unhex(json_string_value(v), &vl) : NULL;
                        h[k] = (struct dedupd_header){json_string_value(json_array_get(w->names, k)), dec,
                                                      vl};
                }
                if (h) {
                        h[k++] = (struct dedupd_header){"dedupd.outbox.id", w->id, strlen(w->id)};
                        if (!PQgetisnull(r, i, 8))
                                h[k++] = (struct dedupd_header){"dedupd.key", PQgetvalue(r, i, 8),
                                                                strlen(PQgetvalue(r, i, 8))};
                }
                recs[i] = (struct producer_record){w->topic, w->key, w->key_len, w->value, w->value_len,
                                                   h, k};
                store_array_int(&ids, strtoll(w->id, NULL, 10));
        }
        if (producer_send(p, recs, (size_t)n, err, errsz)) {
                store_array_free(&ids);
                goto out;
        }
        const char *uparams[1] = {store_array_finish(&ids)};
        PGresult *u = PQexecParams(s->conn, "UPDATE dedupd.outbox SET sent_at = now() WHERE id = ANY($1::bigint[])",
                                   1, NULL, uparams, NULL, NULL, 0);
        int ok = PQresultStatus(u) == PGRES_COMMAND_OK;
        if (!ok)
                snprintf(err, errsz, "outbox mark sent: %s", PQerrorMessage(s->conn));
        PQclear(u);
        store_array_free(&ids);
        if (!ok || store_commit(s, err, errsz))
                goto out;
        ret = n;
out:
        if (ret < 0)
                store_rollback(s);
        else if (n == 0)
                store_commit(s, err, errsz);
        for (int i = 0; rows && i < n; i++) {
                for (size_t k = 0; hdrs && hdrs[i] && k < json_array_size(rows[i].names); k++)
                        free((void *)hdrs[i][k].value);
                free(hdrs ? hdrs[i] : NULL);
                free(rows[i].key);
                free(rows[i].value);
                json_decref(rows[i].names);
                json_decref(rows[i].values);
        }
        free(rows);
        free(recs);
        free(hdrs);
        PQclear(r);
        return ret;
}
