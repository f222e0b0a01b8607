/* store_external: the SQL of external-effect mode — claim with a lease, take over, finish fenced by owner, release, reap. */
#include "pg/store_external.h"
#include "pg/array.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void copy_field(char *dst, size_t sz, const PGresult *r, int row, int col)
{
        snprintf(dst, sz, "%s", PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col));
}

enum store_rc store_ext_claim(struct store *s, const char *ns, const char *key, const char *key_text, const char *topic,
                              int32_t partition, int64_t offset, const char *fingerprint, const char *owner,
                              int64_t lease_ms, int64_t keep_ms, int64_t response_ttl_ms, int *claimed, char *err,
                              size_t errsz)
{
        char part[16], off[24], lease[24], keep[24], ttl[24];
        PGresult *r = NULL;
        enum store_rc rc;

        snprintf(part, sizeof(part), "%" PRId32, partition);
        snprintf(off, sizeof(off), "%" PRId64, offset);
        snprintf(lease, sizeof(lease), "%" PRId64, lease_ms);
        snprintf(keep, sizeof(keep), "%" PRId64, keep_ms);
        snprintf(ttl, sizeof(ttl), "%" PRId64, response_ttl_ms);
        const char *params[11] = {ns,
                                  key,
                                  fingerprint && *fingerprint ? fingerprint : NULL,
                                  topic,
                                  part,
                                  off,
                                  owner,
                                  lease,
                                  keep_ms > 0 ? keep : NULL,
                                  response_ttl_ms > 0 ? ttl : NULL,
                                  key_text};
        *claimed = 0;
        rc = store_query(s,
                         "INSERT INTO dedupd.keys (namespace, idem_key, status, fingerprint, topic, partition,"
                         " \"offset\", attempts, owner, lease_until, expires_at, response_expires_at, key_text)"
                         " VALUES ($1, $2, 'PENDING', decode($3, 'hex'), $4, $5::int, $6::bigint, 1, $7,"
                         " now() + $8::bigint * interval '1 millisecond',"
                         " now() + $9::bigint * interval '1 millisecond',"
                         " now() + $10::bigint * interval '1 millisecond', $11)"
                         " ON CONFLICT (namespace, idem_key) DO NOTHING"
                         " RETURNING attempts",
                         11, params, &r, err, errsz);
        if (rc)
                return rc;
        *claimed = PQntuples(r) == 1;
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_ext_read(struct store *s, const char *ns, const char *key, struct store_ext_row *row, int *found,
                             char *err, size_t errsz)
{
        const char *params[2] = {ns, key};
        PGresult *r = NULL;
        enum store_rc rc;

        memset(row, 0, sizeof(*row));
        *found = 0;
        rc = store_query(s,
                         "SELECT status, owner, lease_until, status = 'PENDING' AND lease_until > now(),"
                         " attempts, response, encode(fingerprint, 'hex'), reconciled"
                         " FROM dedupd.keys WHERE namespace = $1 AND idem_key = $2",
                         2, params, &r, err, errsz);
        if (rc)
                return rc;
        if (PQntuples(r) == 1) {
                *found = 1;
                row->status = key_status_parse(PQgetvalue(r, 0, 0));
                copy_field(row->owner, sizeof(row->owner), r, 0, 1);
                copy_field(row->lease_until, sizeof(row->lease_until), r, 0, 2);
                row->live = !PQgetisnull(r, 0, 3) && PQgetvalue(r, 0, 3)[0] == 't';
                row->attempts = atoi(PQgetvalue(r, 0, 4));
                copy_field(row->response, sizeof(row->response), r, 0, 5);
                copy_field(row->fingerprint, sizeof(row->fingerprint), r, 0, 6);
                row->reconciled = atoi(PQgetvalue(r, 0, 7));
        }
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_ext_take_over(struct store *s, const char *ns, const char *key, const char *owner, int64_t lease_ms,
                                  int from_expired, int *attempts, char *err, size_t errsz)
{
        char lease[24];
        const char *params[4] = {ns, key, owner, lease};
        PGresult *r = NULL;
        enum store_rc rc;

        snprintf(lease, sizeof(lease), "%" PRId64, lease_ms);
        *attempts = 0;
        /* The WHERE clause is the compare: two takers of one expired lease
         * both run this, and the row lock lets exactly one of them match. */
        rc = store_query(s,
                         from_expired ? "UPDATE dedupd.keys SET status = 'PENDING', owner = $3,"
                                        " lease_until = now() + $4::bigint * interval '1 millisecond',"
                                        " attempts = attempts + 1, updated_at = now()"
                                        " WHERE namespace = $1 AND idem_key = $2 AND status = 'EXPIRED'"
                                        " RETURNING attempts"
                                      : "UPDATE dedupd.keys SET owner = $3,"
                                        " lease_until = now() + $4::bigint * interval '1 millisecond',"
                                        " attempts = attempts + 1, updated_at = now()"
                                        " WHERE namespace = $1 AND idem_key = $2 AND status = 'PENDING'"
                                        " AND (lease_until < now() OR owner = $3)"
                                        " RETURNING attempts",
                         4, params, &r, err, errsz);
        if (rc)
                return rc;
        if (PQntuples(r) == 1)
                *attempts = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_ext_finish(struct store *s, const char *ns, const char *key, const char *owner,
                               enum key_status status, const char *response, int *finished, char *err, size_t errsz)
{
        const char *params[5] = {ns, key, owner, key_status_name(status), response};
        PGresult *r = NULL;
        enum store_rc rc;

        *finished = 0;
        /* Fencing: only the owner of a PENDING row may finish it. An owner
         * whose lease ran out but whom nobody replaced still may: nobody
         * else ran the effect. */
        rc = store_query(s,
                         "UPDATE dedupd.keys SET status = $4, response = $5, owner = NULL,"
                         " lease_until = NULL, updated_at = now()"
                         " WHERE namespace = $1 AND idem_key = $2 AND owner = $3 AND status = 'PENDING'",
                         5, params, &r, err, errsz);
        if (rc)
                return rc;
        *finished = atoi(PQcmdTuples(r)) == 1;
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_ext_release(struct store *s, const char *ns, const char *key, const char *owner, char *err,
                                size_t errsz)
{
        const char *params[3] = {ns, key, owner};
        return store_query(s,
                           "UPDATE dedupd.keys SET lease_until = now(), updated_at = now()"
                           " WHERE namespace = $1 AND idem_key = $2 AND owner = $3 AND status = 'PENDING'",
                           3, params, NULL, err, errsz);
}

enum store_rc store_ext_reap(struct store *s, const char *ns, const char *topic, int64_t expire_after_ms, int limit,
                             size_t *reaped, char *sample, size_t samplesz, char *err, size_t errsz)
{
        char after[24], lim[16];
        const char *params[4] = {ns, topic, after, lim};
        PGresult *r = NULL;
        enum store_rc rc;

        snprintf(after, sizeof(after), "%" PRId64, expire_after_ms);
        snprintf(lim, sizeof(lim), "%d", limit);
        *reaped = 0;
        /* Small batches through the keys_pending index; SKIP LOCKED so the
         * reaper never waits on an owner finishing right now. The row stays:
         * deleting it would let the next delivery execute again. */
        rc = store_query(s,
                         "UPDATE dedupd.keys AS k SET status = 'EXPIRED', owner = NULL, updated_at = now()"
                         " FROM (SELECT idem_key FROM dedupd.keys"
                         "       WHERE namespace = $1 AND status = 'PENDING' AND topic = $2"
                         "       AND lease_until < now() - $3::bigint * interval '1 millisecond'"
                         "       ORDER BY lease_until LIMIT $4::int FOR UPDATE SKIP LOCKED) AS e"
                         " WHERE k.namespace = $1 AND k.idem_key = e.idem_key AND k.status = 'PENDING'"
                         " RETURNING k.idem_key",
                         4, params, &r, err, errsz);
        if (rc)
                return rc;
        *reaped = (size_t)PQntuples(r);
        for (int row = 0; row < PQntuples(r) && sample && samplesz; row++) {
                size_t used = strlen(sample);
                const char *k = PQgetvalue(r, row, 0);
                if (used >= 3 && !strcmp(sample + used - 3, "..."))
                        break;
                if (used + strlen(k) + 8 > samplesz) {
                        if (used + 6 <= samplesz)
                                snprintf(sample + used, samplesz - used, "%s...", used ? ", " : "");
                        break;
                }
                snprintf(sample + used, samplesz - used, "%s%s", used ? ", " : "", k);
        }
        PQclear(r);
        return STORE_OK;
}
