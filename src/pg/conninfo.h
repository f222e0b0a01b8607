/* conninfo: a libpq connection string as keywords and values, with dedupd's connect_timeout and name filled in. */
#ifndef DEDUPD_PG_CONNINFO_H
#define DEDUPD_PG_CONNINFO_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

/** What PQconnectdbParams() takes; the strings belong to opts. */
struct conninfo_params {
        const char **keys, **values; /* NULL-terminated */
        PQconninfoOption *opts;
        char timeout[24];
};

/**
 * Parse conninfo with libpq (PQconninfoParse: key=value strings and URIs
 * alike, so a password is never taken apart by hand) and set
 * connect_timeout: the conninfo's own, else PGCONNECT_TIMEOUT's, else
 * default_s; and, when cap_ms > 0, at most cap_ms rounded up to seconds (a
 * deadline wins over a longer or infinite timeout); fallback_application_name
 * dedupd unless it has one. Every other parameter is passed as written.
 * -1 with libpq's reason in err, every part of the conninfo it quotes
 * hidden (it may be a piece of the password).
 */
int conninfo_params_init(struct conninfo_params *p, const char *conninfo, int default_s, int64_t cap_ms, char *err,
                         size_t errsz) __attribute__((warn_unused_result));
void conninfo_params_free(struct conninfo_params *p);

/** The connect_timeout p sets, as libpq reads it (0: none). */
int conninfo_timeout_s(const struct conninfo_params *p);

#endif
