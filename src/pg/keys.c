/* keys: the statements of the transactional batch on dedupd.keys — probe and insert (the optimistic claim), or claim and record outcomes (the pessimistic one), read first outcomes. */
#include "pg/keys.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "pg/array.h"

/* Which claimed row a returned key is: the rows are sorted bytewise (as the
 * C collation of the claim), so search. */
static struct store_claim_row *claimed_row(struct store_claim_row *rows, size_t n, const char *key)
{
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(rows[mid].key, key);
                if (c == 0)
                        return &rows[mid];
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

/* The claim's answer per key: fresh (with its row), or a known key's
 * outcome, or neither (committed by another transaction after this
 * statement's snapshot: read again). */
static void claim_results(PGresult *r, struct store_claim_row *rows, size_t n, const struct store_claim_outcomes *out,
                          const char **unseen, size_t *nunseen)
{
        for (size_t i = 0; i < n; i++)
                rows[i].matched = 1; /* unless the statement says otherwise */
        for (int i = 0; i < PQntuples(r); i++) {
                struct store_claim_row *row = claimed_row(rows, n, PQgetvalue(r, i, 0));
                if (!row)
                        continue;
                row->matched = 0;
                if (!PQgetisnull(r, i, 1)) {
                        row->fresh = 1;
                        snprintf(row->row, sizeof(row->row), "%s", PQgetvalue(r, i, 1));
                } else if (PQgetisnull(r, i, 2)) {
                        unseen[(*nunseen)++] = row->key;
                } else {
                        out->cb(out->opaque, row->key, key_status_parse(PQgetvalue(r, i, 2)),
                                PQgetisnull(r, i, 3) ? NULL : PQgetvalue(r, i, 3),
                                PQgetisnull(r, i, 4) ? NULL : PQgetvalue(r, i, 4));
                }
        }
}

/* What the claim and the keys' INSERT bind alike: $1 the namespace, $2..$6
 * each key's key, topic, partition, offset and fingerprint, $7 and $8 when
 * keys and responses expire; each statement binds its key_text (x), then
 * the rows' own keep and response TTL (e, l: a tenant's retention class;
 * NULL for the whole array when no row has one, -1 in l: no TTL) last. */
struct key_params {
        struct store_array k, t, p, o, f, x, e, l;
        int own; /* a row has its own retention */
        char keep[24], ttl[24];
};

/* A row's own retention, or NULL (the batch's). */
static void key_params_own(struct key_params *kp, int64_t keep_ms, int64_t ttl_ms)
{
        char e[24], l[24];
        snprintf(e, sizeof(e), "%" PRId64, keep_ms);
        snprintf(l, sizeof(l), "%" PRId64, ttl_ms > 0 ? ttl_ms : -1);
        store_array_text(&kp->e, keep_ms > 0 ? e : NULL);
        store_array_text(&kp->l, keep_ms > 0 ? l : NULL);
        kp->own |= keep_ms > 0;
}

static const char *key_params_keep(struct key_params *kp) { return kp->own ? store_array_finish(&kp->e) : NULL; }
static const char *key_params_ttl(struct key_params *kp) { return kp->own ? store_array_finish(&kp->l) : NULL; }

static void key_params_add(struct key_params *kp, const char *key, const char *topic, int32_t partition, int64_t offset,
                           const char *fingerprint, const char *key_text)
{
        store_array_text(&kp->k, key);
        store_array_text(&kp->t, topic);
        store_array_int(&kp->p, partition);
        store_array_int(&kp->o, offset);
        store_array_text(&kp->f, fingerprint);
        store_array_text(&kp->x, key_text);
}

/* params[0..7]; the key_text array is key_params_text's. */
static void key_params_bind(struct key_params *kp, const char *ns, int64_t keep_ms, int64_t response_ttl_ms,
                            const char **params)
{
        snprintf(kp->keep, sizeof(kp->keep), "%" PRId64, keep_ms);
        snprintf(kp->ttl, sizeof(kp->ttl), "%" PRId64, response_ttl_ms);
        params[0] = ns;
        params[1] = store_array_finish(&kp->k);
        params[2] = store_array_finish(&kp->t);
        params[3] = store_array_finish(&kp->p);
        params[4] = store_array_finish(&kp->o);
        params[5] = store_array_finish(&kp->f);
        params[6] = keep_ms > 0 ? kp->keep : NULL;
        params[7] = response_ttl_ms > 0 ? kp->ttl : NULL;
}

static const char *key_params_text(struct key_params *kp) { return store_array_finish(&kp->x); }

static void key_params_free(struct key_params *kp)
{
        store_array_free(&kp->k);
        store_array_free(&kp->t);
        store_array_free(&kp->p);
        store_array_free(&kp->o);
        store_array_free(&kp->f);
        store_array_free(&kp->x);
        store_array_free(&kp->e);
        store_array_free(&kp->l);
}

enum store_rc store_claim(struct store *s, const char *ns, struct store_claim_row *rows, size_t n, int64_t keep_ms,
                          int64_t response_ttl_ms, const struct store_claim_outcomes *out, char *err, size_t errsz)
{
        struct key_params kp = {0};
        struct store_array w = {0};
        PGresult *r = NULL;
        enum store_rc rc;
        size_t nunseen = 0;
        const char **unseen = xcalloc(n ? n : 1, sizeof(*unseen));
        const char *params[12];

        for (size_t i = 0; i < n; i++) {
                key_params_add(&kp, rows[i].key, rows[i].topic, rows[i].partition, rows[i].offset, rows[i].fingerprint,
                               rows[i].key_text);
                key_params_own(&kp, rows[i].keep_ms, rows[i].response_ttl_ms);
                store_array_int(&w, rows[i].want_outcome != 0);
                rows[i].fresh = 0;
                rows[i].row[0] = '\0';
        }
        key_params_bind(&kp, ns, keep_ms, response_ttl_ms, params);
        params[8] = store_array_finish(&w);
        params[9] = key_params_text(&kp);
        params[10] = key_params_keep(&kp);
        params[11] = key_params_ttl(&kp);
        /* ORDER BY: rows are inserted, and their index entries locked, in key
         * order, so two claimers of overlapping batches never deadlock. The
         * lookup of a key seen before shares the statement's snapshot
         * (exactly the keys that were there before) and is LATERAL with a
         * LIMIT (the key is unique) so it stays one index probe per key:
         * flattened into a join, it is planned as a scan of every key of the
         * namespace whenever the planner thinks that cheaper than the probes. A known key
         * whose stored fingerprint is this one's needs nothing more (no
         * mismatch) unless its outcome is wanted: it is not returned. */
        rc = store_query_hot(
                s,
                "WITH u AS (SELECT * FROM unnest($2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[],"
                "           $9::int[], $10::text[], $11::bigint[], $12::bigint[]) AS u(k, t, p, o, f, w, x, e, l)),"
                " ins AS (INSERT INTO dedupd.keys (namespace, idem_key, status, fingerprint, topic, partition,"
                "         \"offset\", expires_at, response_expires_at, key_text)"
                "         SELECT $1, u.k, 'DONE', decode(u.f, 'hex'), u.t, u.p, u.o,"
                "         now() + coalesce(u.e, $7::bigint) * interval '1 millisecond',"
                "         now() + nullif(coalesce(u.l, $8::bigint), -1) * interval '1 millisecond', u.x"
                "         FROM u ORDER BY u.k COLLATE \"C\""
                "         ON CONFLICT (namespace, idem_key) DO NOTHING"
                "         RETURNING idem_key, ctid),"
                /* The commit guard, while fresh keys wait for their handler (pg/session.h). */
                " g AS (INSERT INTO dedupd.txn_guard (xid) SELECT pg_current_xact_id()"
                "       WHERE EXISTS (SELECT 1 FROM ins) ON CONFLICT DO NOTHING)"
                " SELECT u.k, i.ctid, kn.status, kn.response, encode(kn.fingerprint, 'hex')"
                " FROM u LEFT JOIN ins i ON i.idem_key = u.k"
                " LEFT JOIN LATERAL (SELECT d.idem_key, d.status, d.response, d.fingerprint FROM dedupd.keys d"
                "                    WHERE i.idem_key IS NULL AND d.namespace = $1 AND d.idem_key = u.k LIMIT 1) kn ON "
                "true"
                " WHERE i.idem_key IS NOT NULL OR kn.idem_key IS NULL OR u.w = 1"
                "    OR kn.fingerprint IS NULL OR kn.fingerprint <> decode(u.f, 'hex')",
                12, params, &r, err, errsz);
        if (rc == STORE_OK) {
                claim_results(r, rows, n, out, unseen, &nunseen);
                PQclear(r);
                /* A statement of its own sees what committed meanwhile. */
                rc = store_outcomes(s, ns, nunseen, unseen, out->cb, out->opaque, err, errsz);
        }
        free(unseen);
        key_params_free(&kp);
        store_array_free(&w);
        return rc;
}

/* The probe's answer per key: absent (fresh), or a known key's outcome; a
 * key not returned is known with this very fingerprint (matched). */
static void probe_results(PGresult *r, struct store_claim_row *rows, size_t n, const struct store_claim_outcomes *out)
{
        for (size_t i = 0; i < n; i++) {
                rows[i].matched = 1; /* unless the statement says otherwise */
                rows[i].fresh = 0;
                rows[i].row[0] = '\0';
        }
        for (int i = 0; i < PQntuples(r); i++) {
                struct store_claim_row *row = claimed_row(rows, n, PQgetvalue(r, i, 0));
                if (!row)
                        continue;
                row->matched = 0;
                if (PQgetvalue(r, i, 1)[0] == 't')
                        row->fresh = 1;
                else
                        out->cb(out->opaque, row->key, key_status_parse(PQgetvalue(r, i, 2)),
                                PQgetisnull(r, i, 3) ? NULL : PQgetvalue(r, i, 3),
                                PQgetisnull(r, i, 4) ? NULL : PQgetvalue(r, i, 4));
        }
}

enum store_rc store_probe_keys(struct store *s, const char *ns, struct store_claim_row *rows, size_t n,
                               const struct store_claim_outcomes *out, char *err, size_t errsz)
{
        struct store_array k = {0}, f = {0}, w = {0};
        PGresult *r = NULL;
        enum store_rc rc;

        for (size_t i = 0; i < n; i++) {
                store_array_text(&k, rows[i].key);
                store_array_text(&f, rows[i].fingerprint);
                store_array_int(&w, rows[i].want_outcome != 0);
        }
        const char *params[4] = {ns, store_array_finish(&k), store_array_finish(&f), store_array_finish(&w)};
        /* The lookup is LATERAL with a LIMIT, as in store_claim, so it stays
         * one index probe per key whatever the planner thinks of the table.
         * p is read twice (the guard, the answer), so it is computed once. A
         * known key whose stored fingerprint is this one's needs nothing
         * more unless its outcome is wanted: it is not returned. Nothing is
         * locked: a key committed by another transaction after this
         * statement's snapshot is found by store_insert_keys. */
        rc = store_query_hot(
                s,
                "WITH u AS (SELECT * FROM unnest($2::text[], $3::text[], $4::int[]) AS u(k, f, w)),"
                " p AS (SELECT u.k, u.f, u.w, kn.idem_key AS known, kn.status, kn.response, kn.fingerprint FROM u"
                "       LEFT JOIN LATERAL (SELECT d.idem_key, d.status, d.response, d.fingerprint FROM dedupd.keys d"
                "                          WHERE d.namespace = $1 AND d.idem_key = u.k LIMIT 1) kn ON true),"
                /* The commit guard, while fresh keys wait for their handler (pg/session.h). */
                " g AS (INSERT INTO dedupd.txn_guard (xid) SELECT pg_current_xact_id()"
                "       WHERE EXISTS (SELECT 1 FROM p WHERE p.known IS NULL) ON CONFLICT DO NOTHING)"
                " SELECT p.k, p.known IS NULL, p.status, p.response, encode(p.fingerprint, 'hex') FROM p"
                " WHERE p.known IS NULL OR p.w = 1 OR p.fingerprint IS NULL OR p.fingerprint <> decode(p.f, 'hex')",
                4, params, &r, err, errsz);
        if (rc == STORE_OK) {
                probe_results(r, rows, n, out);
                PQclear(r);
        }
        store_array_free(&k);
        store_array_free(&f);
        store_array_free(&w);
        return rc;
}

enum store_rc store_insert_keys(struct store *s, const char *ns, const struct store_key_row *rows, size_t n,
                                int64_t keep_ms, int64_t response_ttl_ms, char *err, size_t errsz)
{
        struct key_params kp = {0};
        struct store_array st = {0}, rs = {0};
        enum store_rc rc;
        const char *params[13];

        if (n == 0)
                return STORE_OK;
        for (size_t i = 0; i < n; i++) {
                key_params_add(&kp, rows[i].key, rows[i].topic, rows[i].partition, rows[i].offset, rows[i].fingerprint,
                               rows[i].key_text);
                key_params_own(&kp, rows[i].keep_ms, rows[i].response_ttl_ms);
                store_array_text(&st, key_status_name(rows[i].status));
                store_array_text(&rs, rows[i].response);
        }
        key_params_bind(&kp, ns, keep_ms, response_ttl_ms, params);
        params[8] = store_array_finish(&st);
        params[9] = store_array_finish(&rs);
        params[10] = key_params_text(&kp);
        params[11] = key_params_keep(&kp);
        params[12] = key_params_ttl(&kp);
        /* In key order, as every claimer locks (no deadlock between two
         * batches of overlapping keys); no ON CONFLICT: a key that is there
         * now was committed by another transaction since the probe, and
         * the unique index says so. One heap tuple per key, with its
         * outcome: nothing to update after. */
        rc = store_query_hot(
                s,
                "INSERT INTO dedupd.keys (namespace, idem_key, status, fingerprint, response, topic, partition,"
                " \"offset\", expires_at, response_expires_at, key_text)"
                " SELECT $1, u.k, u.s, decode(u.f, 'hex'), u.r, u.t, u.p, u.o,"
                " now() + coalesce(u.e, $7::bigint) * interval '1 millisecond',"
                " now() + nullif(coalesce(u.l, $8::bigint), -1) * interval '1 millisecond', u.x"
                " FROM unnest($2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[], $9::text[], $10::text[],"
                "             $11::text[], $12::bigint[], $13::bigint[]) AS u(k, t, p, o, f, s, r, x, e, l)"
                " ORDER BY u.k COLLATE \"C\"",
                13, params, NULL, err, errsz);
        if (rc == STORE_DATA && store_last_keys_conflict(s))
                rc = STORE_CONFLICT;
        key_params_free(&kp);
        store_array_free(&st);
        store_array_free(&rs);
        return rc;
}

enum store_rc store_record(struct store *s, const char *ns, const struct store_outcome_row *rows, size_t n, char *err,
                           size_t errsz)
{
        struct store_array k = {0}, w = {0}, st = {0}, rs = {0};
        enum store_rc rc;

        if (n == 0)
                return STORE_OK;
        for (size_t i = 0; i < n; i++) {
                store_array_text(&k, rows[i].key);
                store_array_text(&w, rows[i].row);
                store_array_text(&st, key_status_name(rows[i].status));
                store_array_text(&rs, rows[i].response);
        }
        const char *params[5] = {ns, store_array_finish(&k), store_array_finish(&w), store_array_finish(&st),
                                 store_array_finish(&rs)};
        /* By row, not by key: a join on the key is planned from the table's
         * statistics, and a young table's mislead the planner into reading
         * every row of the namespace per batch. The rows are this
         * transaction's own inserts: nobody else can move them. The key too:
         * in dedupd.keys_p it prunes the row's place to its own partition. */
        rc = store_query_hot(s,
                             "UPDATE dedupd.keys AS d SET status = u.s, response = u.r, updated_at = now()"
                             " FROM unnest($2::text[], $3::tid[], $4::text[], $5::text[]) AS u(k, w, s, r)"
                             " WHERE d.ctid = u.w AND d.namespace = $1 AND d.idem_key = u.k",
                             5, params, NULL, err, errsz);
        store_array_free(&k);
        store_array_free(&w);
        store_array_free(&st);
        store_array_free(&rs);
        return rc;
}

enum store_rc store_outcomes(struct store *s, const char *ns, size_t n, const char *const *keys, store_outcome_cb *cb,
                             void *opaque, char *err, size_t errsz)
{
        struct store_array k = {0};
        PGresult *r = NULL;
        enum store_rc rc;

        if (n == 0)
                return STORE_OK;
        for (size_t i = 0; i < n; i++)
                store_array_text(&k, keys[i]);
        const char *params[2] = {ns, store_array_finish(&k)};
        rc = store_query(s,
                         "SELECT idem_key, status, response, encode(fingerprint, 'hex') FROM dedupd.keys"
                         " WHERE namespace = $1 AND idem_key = ANY($2::text[])",
                         2, params, &r, err, errsz);
        if (rc == STORE_OK) {
                for (int row = 0; row < PQntuples(r); row++)
                        cb(opaque, PQgetvalue(r, row, 0), key_status_parse(PQgetvalue(r, row, 1)),
                           PQgetisnull(r, row, 2) ? NULL : PQgetvalue(r, row, 2),
                           PQgetisnull(r, row, 3) ? NULL : PQgetvalue(r, row, 3));
                PQclear(r);
        }
        store_array_free(&k);
        return rc;
}
