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
        const char *const v[] = {ns,     m->topic, part,           off,
                                 m->key, m->first, m->fingerprint, m->dead_lettered ? "dead-lettered" : "absorbed"};
        rc = store_query(s,
                         "INSERT INTO dedupd.mismatches (namespace, topic, partition, \"offset\", idem_key,"
                         " first_fingerprint, fingerprint, verdict)"
                         " VALUES ($1, $2, $3::int, $4::bigint, $5, $6, $7, $8)"
                         " ON CONFLICT DO NOTHING",
                         8, v, &r, err, errsz);
        PQclear(r);
        return rc;
}
