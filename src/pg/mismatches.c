/* mismatches: dedupd.mismatches — each record whose key was stored with another payload's fingerprint. */
#include "pg/mismatches.h"

#include <inttypes.h>
#include <stdio.h>

enum store_rc store_mismatch_note(struct store *s, const char *ns, const struct store_mismatch *m, char *err,
                                  size_t errsz)
{
        char part[16], off[24];
        PGresult *r = NULL;
        enum store_rc rc;
        snprintf(part, sizeof(part), "%" PRId32, m->partition);
        snprintf(off, sizeof(off), "%" PRId64, m->offset);
        const char *const v[] = {ns, m->topic, part, off, m->key, m->first, m->fingerprint,
                                 m->dead_lettered ? "dead-lettered" : "absorbed"};
        rc = store_query(s,
                         "INSERT INTO dedupd.mismatches (namespace, topic, partition, \"offset\", idem_key,"
                         " first_fingerprint, fingerprint, verdict)"
                         " VALUES ($1, $2, $3::int, $4::bigint, $5, $6, $7, $8)"
                         " ON CONFLICT DO NOTHING",
                         8, v, &r, err, errsz);
        PQclear(r);
        return rc;
}

enum store_rc store_mismatch_summary(struct store *s, const char *ns, int examples, PGresult **count,
                                     PGresult **rows, char *err, size_t errsz)
{
        char lim[16];
        enum store_rc rc;
        snprintf(lim, sizeof(lim), "%d", examples);
        const char *const v[] = {ns, lim};
        *count = *rows = NULL;
        if ((rc = store_query(s, "SELECT count(*) FROM dedupd.mismatches WHERE namespace = $1", 1, v, count, err,
                              errsz)))
                return rc;
        return store_query(s,
                           "SELECT idem_key, topic, partition, \"offset\", verdict || ' at ' ||"
                           " to_char(noticed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
                           " FROM dedupd.mismatches WHERE namespace = $1"
                           " ORDER BY noticed_at DESC, topic, partition, \"offset\" DESC LIMIT $2::int",
                           2, v, rows, err, errsz);
}
