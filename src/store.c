/* store: everything dedupd says to PostgreSQL — schema migrations, claims, outcomes, offsets. */
#include "store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Numbered migrations: append only, never edit one that has shipped. */
static const char *const migrations[] = {
        /* 1: keys and per-partition progress */
        "CREATE TABLE IF NOT EXISTS dedupd.keys ("
        "  namespace   text        NOT NULL,"
        "  idem_key    text        NOT NULL,"
        "  status      text        NOT NULL CHECK (status IN ('PENDING','DONE','FAILED','EXPIRED')),"
        "  fingerprint bytea,"
        "  response    text,"
        "  topic       text,"
        "  partition   integer,"
        "  \"offset\"    bigint,"
        "  attempts    integer     NOT NULL DEFAULT 1,"
        "  owner       text,"
        "  lease_until timestamptz,"
        "  created_at  timestamptz NOT NULL DEFAULT now(),"
        "  updated_at  timestamptz NOT NULL DEFAULT now(),"
        "  expires_at  timestamptz,"
        "  PRIMARY KEY (namespace, idem_key)"
        ");"
        "CREATE TABLE IF NOT EXISTS dedupd.offsets ("
        "  namespace     text        NOT NULL,"
        "  topic         text        NOT NULL,"
        "  partition     integer     NOT NULL,"
        "  next_offset   bigint      NOT NULL,"
        "  consumed      bigint      NOT NULL DEFAULT 0,"
        "  applied       bigint      NOT NULL DEFAULT 0,"
        "  rejected      bigint      NOT NULL DEFAULT 0,"
        "  duplicates    bigint      NOT NULL DEFAULT 0,"
        "  dead_lettered bigint      NOT NULL DEFAULT 0,"
        "  updated_at    timestamptz NOT NULL DEFAULT now(),"
        "  PRIMARY KEY (namespace, topic, partition)"
        ");",
        /* 2: a history of committed batches (for "duplicates absorbed since T"),
         *    and the crash-loop ledger: batches that were started, per first offset */
        "CREATE TABLE IF NOT EXISTS dedupd.progress_log ("
        "  namespace     text        NOT NULL,"
        "  topic         text        NOT NULL,"
        "  partition     integer     NOT NULL,"
        "  from_offset   bigint      NOT NULL,"
        "  next_offset   bigint      NOT NULL,"
        "  consumed      bigint      NOT NULL,"
        "  applied       bigint      NOT NULL,"
        "  rejected      bigint      NOT NULL,"
        "  duplicates    bigint      NOT NULL,"
        "  dead_lettered bigint      NOT NULL,"
        "  committed_at  timestamptz NOT NULL DEFAULT now()"
        ");"
        "CREATE INDEX IF NOT EXISTS progress_log_time ON dedupd.progress_log (namespace, committed_at);"
        /* A row per batch start (single = false) or isolated message (single =
         * true) that a process began and did not commit: counts crash loops. */
        "CREATE TABLE IF NOT EXISTS dedupd.attempts ("
        "  namespace    text        NOT NULL,"
        "  topic        text        NOT NULL,"
        "  partition    integer     NOT NULL,"
        "  \"offset\"     bigint      NOT NULL,"
        "  single       boolean     NOT NULL,"
        "  until_offset bigint      NOT NULL,"
        "  attempts     integer     NOT NULL DEFAULT 1,"
        "  last_at      timestamptz NOT NULL DEFAULT now(),"
        "  PRIMARY KEY (namespace, topic, partition, \"offset\", single)"
        ");",
        /* 3: the life of a key (issue "the whole life of an idempotency key"):
         *    response expiry, fingerprint mismatch counters, purge and reaper
         *    indexes, the outbox */
        "ALTER TABLE dedupd.keys ADD COLUMN IF NOT EXISTS response_expires_at timestamptz;"
        "ALTER TABLE dedupd.offsets ADD COLUMN IF NOT EXISTS mismatches bigint NOT NULL DEFAULT 0;"
        "ALTER TABLE dedupd.progress_log ADD COLUMN IF NOT EXISTS mismatches bigint NOT NULL DEFAULT 0;"
        "CREATE INDEX IF NOT EXISTS keys_expiry ON dedupd.keys (namespace, expires_at)"
        "  WHERE status <> 'PENDING' AND expires_at IS NOT NULL;"
        "CREATE INDEX IF NOT EXISTS keys_response_expiry ON dedupd.keys (namespace, response_expires_at)"
        "  WHERE response IS NOT NULL AND response_expires_at IS NOT NULL;"
        "CREATE INDEX IF NOT EXISTS keys_pending ON dedupd.keys (namespace, lease_until)"
        "  WHERE status = 'PENDING';"
        "CREATE TABLE IF NOT EXISTS dedupd.outbox ("
        "  id            bigserial   PRIMARY KEY,"
        "  namespace     text        NOT NULL,"
        "  idem_key      text,"
        "  topic         text        NOT NULL,"
        "  key           bytea,"
        "  value         bytea,"
        "  header_names  text[]      NOT NULL DEFAULT '{}',"
        "  header_values bytea[]     NOT NULL DEFAULT '{}',"
        "  created_at    timestamptz NOT NULL DEFAULT now(),"
        "  sent_at       timestamptz"
        ");"
        "CREATE INDEX IF NOT EXISTS outbox_unsent ON dedupd.outbox (namespace, id) WHERE sent_at IS NULL;",
        /* 4: room on each page for the response written after the claim, so
         *    that update stays a heap-only (HOT) update */
        "ALTER TABLE dedupd.keys SET (fillfactor = 85);",
        /* 5: an isolated message's crashes include those of the batches it
         *    was in before it was isolated */
        "ALTER TABLE dedupd.attempts ADD COLUMN IF NOT EXISTS inherited integer NOT NULL DEFAULT 0;",
};
#define MIGRATION_CNT ((int)(sizeof(migrations) / sizeof(migrations[0])))

static void set_err(char *err, size_t errsz, PGconn *conn, const PGresult *res)
{
        const char *m = res ? PQresultErrorMessage(res) : NULL;
        if (!m || !*m)
                m = conn ? PQerrorMessage(conn) : "no connection";
        snprintf(err, errsz, "%s", m);
        store_one_line(err);
}

void store_one_line(char *msg)
{
        /* libpq messages span lines ("...\n\tThis probably means..."); a log
         * entry is one line. */
        char *w = msg;
        for (const char *r = msg; *r; r++) {
                if (*r == '\n' || *r == '\t' || *r == '\r') {
                        if (w > msg && w[-1] != ' ')
                                *w++ = ' ';
                        continue;
                }
                *w++ = *r;
        }
        while (w > msg && w[-1] == ' ')
                w--;
        *w = '\0';
}

/* Server notices and warnings go through the logger, on one line. */
static void notice(void *arg, const char *message)
{
        char buf[1024];
        (void)arg;
        snprintf(buf, sizeof(buf), "%s", message);
        store_one_line(buf);
        log_warn("postgres", "%s", buf);
}

enum store_rc store_classify(PGconn *conn, const PGresult *res)
{
        const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
        if (!conn || PQstatus(conn) != CONNECTION_OK)
                return STORE_CONN;
        if (!state)
                return res ? STORE_ERROR : STORE_CONN;
        if (!strcmp(state, "40001") || !strcmp(state, "40P01") || !strcmp(state, "55P03"))
                return STORE_RETRY;
        /* 08: connection exceptions; 57P0x: admin shutdown, crash shutdown, cannot connect now */
        if (!strncmp(state, "08", 2) || !strncmp(state, "57P", 3) || !strcmp(state, "53300"))
                return STORE_CONN;
        return STORE_ERROR;
}

static void describe_target(struct store *s)
{
        snprintf(s->target, sizeof(s->target), "%s:%s/%s",
                 PQhost(s->conn) ? PQhost(s->conn) : "?", PQport(s->conn) ? PQport(s->conn) : "?",
                 PQdb(s->conn) ? PQdb(s->conn) : "?");
}

enum store_rc store_connect(struct store *s, const char *conninfo, char *err, size_t errsz)
{
        if (s->conn)
                PQfinish(s->conn);
        if (conninfo && conninfo != s->conninfo) {
                free(s->conninfo);
                s->conninfo = strdup(conninfo);
        }
        s->conn = PQconnectdb(s->conninfo);
        if (PQstatus(s->conn) != CONNECTION_OK) {
                /* PQerrorMessage names host and port, never the password. */
                set_err(err, errsz, s->conn, NULL);
                PQfinish(s->conn);
                s->conn = NULL;
                return STORE_CONN;
        }
        describe_target(s);
        PQsetNoticeProcessor(s->conn, notice, NULL);
        /* NOTICEs ("already exists, skipping") are noise; WARNINGs are not.
         * A zombie (a stopped process holding a transaction) blocks its
         * successor's claims: bound how long an idle transaction may live. */
        char idle[24];
        snprintf(idle, sizeof(idle), "%d", s->idle_tx_timeout_ms > 0 ? s->idle_tx_timeout_ms : 60000);
        const char *params[1] = {idle};
        PGresult *r = PQexecParams(s->conn,
                                   "SELECT set_config('application_name', 'dedupd', false),"
                                   " set_config('client_min_messages', 'warning', false),"
                                   " set_config('idle_in_transaction_session_timeout', $1, false)",
                                   1, NULL, params, NULL, NULL, 0);
        PQclear(r);
        return STORE_OK;
}

void store_close(struct store *s)
{
        if (s->conn)
                PQfinish(s->conn);
        s->conn = NULL;
        free(s->conninfo);
        s->conninfo = NULL;
}

int store_ok(const struct store *s) { return s->conn && PQstatus(s->conn) == CONNECTION_OK; }

enum store_rc store_exec(struct store *s, const char *sql, char *err, size_t errsz)
{
        PGresult *r;
        enum store_rc rc = STORE_OK;
        if (!s->conn) {
                snprintf(err, errsz, "not connected");
                return STORE_CONN;
        }
        r = PQexec(s->conn, sql);
        if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
                set_err(err, errsz, s->conn, r);
                rc = store_classify(s->conn, r);
        }
        PQclear(r);
        return rc;
}

enum store_rc store_begin(struct store *s, char *err, size_t errsz)
{
        return store_exec(s, "BEGIN", err, errsz);
}

enum store_rc store_commit(struct store *s, char *err, size_t errsz)
{
        return store_exec(s, "COMMIT", err, errsz);
}

void store_rollback(struct store *s)
{
        char err[256];
        if (s->conn && PQtransactionStatus(s->conn) != PQTRANS_IDLE &&
            PQstatus(s->conn) == CONNECTION_OK)
                store_exec(s, "ROLLBACK", err, sizeof(err));
}

/* Run a parameterised statement; all parameters are text. */
static enum store_rc run(struct store *s, const char *sql, int nparams, const char *const *params,
                         PGresult **out, char *err, size_t errsz)
{
        PGresult *r;
        enum store_rc rc = STORE_OK;
        if (!s->conn) {
                snprintf(err, errsz, "not connected");
                return STORE_CONN;
        }
        r = PQexecParams(s->conn, sql, nparams, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
                set_err(err, errsz, s->conn, r);
                rc = store_classify(s->conn, r);
                PQclear(r);
                return rc;
        }
        if (out)
                *out = r;
        else
                PQclear(r);
        return rc;
}

enum store_rc store_query(struct store *s, const char *sql, int nparams, const char *const *params,
                          PGresult **out, char *err, size_t errsz)
{
        return run(s, sql, nparams, params, out, err, errsz);
}

enum store_rc store_migrate(struct store *s, char *err, size_t errsz)
{
        enum store_rc rc;
        PGresult *r = NULL;
        int applied = 0;

        if ((rc = store_begin(s, err, errsz)))
                return rc;
        /* Serialise concurrent starters; the lock ends with the transaction. */
        if ((rc = store_exec(s, "SELECT pg_advisory_xact_lock(hashtext('dedupd.migrate'))", err, errsz)) ||
            (rc = store_exec(s, "CREATE SCHEMA IF NOT EXISTS dedupd", err, errsz)) ||
            (rc = store_exec(s,
                             "CREATE TABLE IF NOT EXISTS dedupd.schema_migrations ("
                             " version integer PRIMARY KEY,"
                             " applied_at timestamptz NOT NULL DEFAULT now())",
                             err, errsz)) ||
            (rc = run(s, "SELECT coalesce(max(version), 0) FROM dedupd.schema_migrations", 0, NULL, &r,
                      err, errsz)))
                goto error;
        applied = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
        if (applied > MIGRATION_CNT) {
                snprintf(err, errsz,
                         "the database schema is at version %d but this dedupd knows only %d: "
                         "it was migrated by a newer dedupd",
                         applied, MIGRATION_CNT);
                rc = STORE_ERROR;
                goto error;
        }
        for (int v = applied + 1; v <= MIGRATION_CNT; v++) {
                char vs[16];
                const char *params[1] = {vs};
                snprintf(vs, sizeof(vs), "%d", v);
                if ((rc = store_exec(s, migrations[v - 1], err, errsz)) ||
                    (rc = run(s, "INSERT INTO dedupd.schema_migrations (version) VALUES ($1::int)", 1,
                              params, NULL, err, errsz)))
                        goto error;
                log_info("store", "applied schema migration %d", v);
        }
        return store_commit(s, err, errsz);
error:
        store_rollback(s);
        return rc;
}

int store_schema_version(struct store *s, int *applied, int *known, char *err, size_t errsz)
{
        PGresult *r = NULL;
        *known = MIGRATION_CNT;
        *applied = 0;
        if (run(s,
                "SELECT CASE WHEN to_regclass('dedupd.schema_migrations') IS NULL THEN 0 "
                "ELSE (SELECT coalesce(max(version), 0) FROM dedupd.schema_migrations) END",
                0, NULL, &r, err, errsz))
                return -1;
        *applied = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
        return 0;
}

/* ---- array literals -------------------------------------------------------- */

static void arr_grow(struct store_array *a, size_t need)
{
        if (a->len + need + 2 <= a->cap)
                return;
        size_t cap = a->cap ? a->cap : 256;
        while (cap < a->len + need + 2)
                cap *= 2;
        char *p = realloc(a->p, cap);
        if (!p)
                abort(); /* out of memory building a statement: nothing sane to do */
        a->p = p;
        a->cap = cap;
}

static void arr_sep(struct store_array *a)
{
        arr_grow(a, 1);
        a->p[a->len++] = a->cnt ? ',' : '{';
        a->cnt++;
}

void store_array_text(struct store_array *a, const char *s)
{
        arr_sep(a);
        if (!s) {
                arr_grow(a, 4);
                memcpy(a->p + a->len, "NULL", 4);
                a->len += 4;
                return;
        }
        arr_grow(a, 2 * strlen(s) + 2);
        a->p[a->len++] = '"';
        for (; *s; s++) {
                if (*s == '"' || *s == '\\')
                        a->p[a->len++] = '\\';
                a->p[a->len++] = *s;
        }
        a->p[a->len++] = '"';
}

void store_array_int(struct store_array *a, int64_t v)
{
        arr_sep(a);
        arr_grow(a, 24);
        a->len += (size_t)snprintf(a->p + a->len, 24, "%" PRId64, v);
}

const char *store_array_finish(struct store_array *a)
{
        arr_grow(a, 2);
        if (!a->cnt)
                a->p[a->len++] = '{';
        a->p[a->len++] = '}';
        a->p[a->len] = '\0';
        return a->p;
}

void store_array_free(struct store_array *a)
{
        free(a->p);
        memset(a, 0, sizeof(*a));
}

/* ---- the batch protocol ---------------------------------------------------- */

enum store_rc store_claim(struct store *s, const char *ns, size_t n, const char *const *keys,
                          const char *const *topics, const int32_t *parts, const int64_t *offsets,
                          const char *const *fingerprints, int64_t keep_ms, int64_t response_ttl_ms,
                          int *fresh, char *err, size_t errsz)
{
        char keep[24], ttl[24];
        struct store_array k = {0}, t = {0}, p = {0}, o = {0}, f = {0};
        PGresult *r = NULL;
        enum store_rc rc;

        for (size_t i = 0; i < n; i++) {
                store_array_text(&k, keys[i]);
                store_array_text(&t, topics[i]);
                store_array_int(&p, parts[i]);
                store_array_int(&o, offsets[i]);
                store_array_text(&f, fingerprints[i]);
                fresh[i] = 0;
        }
        snprintf(keep, sizeof(keep), "%" PRId64, keep_ms);
        snprintf(ttl, sizeof(ttl), "%" PRId64, response_ttl_ms);
        const char *params[8] = {ns,
                                 store_array_finish(&k),
                                 store_array_finish(&t),
                                 store_array_finish(&p),
                                 store_array_finish(&o),
                                 store_array_finish(&f),
                                 keep_ms > 0 ? keep : NULL,
                                 response_ttl_ms > 0 ? ttl : NULL};
        /* ORDER BY: rows are inserted, and their index entries locked, in key
         * order, so two claimers of overlapping batches never deadlock. */
        rc = run(s,
                 "INSERT INTO dedupd.keys (namespace, idem_key, status, fingerprint, topic, partition, \"offset\","
                 " expires_at, response_expires_at)"
                 " SELECT $1, u.k, 'DONE', decode(u.f, 'hex'), u.t, u.p, u.o,"
                 " now() + $7::bigint * interval '1 millisecond', now() + $8::bigint * interval '1 millisecond'"
                 " FROM unnest($2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[]) AS u(k, t, p, o, f)"
                 " ORDER BY u.k COLLATE \"C\""
                 " ON CONFLICT (namespace, idem_key) DO NOTHING"
                 " RETURNING idem_key",
                 8, params, &r, err, errsz);
        if (rc == STORE_OK) {
                /* keys are sorted bytewise (as the C collation above): search. */
                for (int row = 0; row < PQntuples(r); row++) {
                        const char *got = PQgetvalue(r, row, 0);
                        size_t lo = 0, hi = n;
                        while (lo < hi) {
                                size_t mid = lo + (hi - lo) / 2;
                                int c = strcmp(keys[mid], got);
                                if (c == 0) {
                                        fresh[mid] = 1;
                                        break;
                                }
                                if (c < 0)
                                        lo = mid + 1;
                                else
                                        hi = mid;
                        }
                }
                PQclear(r);
        }
        store_array_free(&k);
        store_array_free(&t);
        store_array_free(&p);
        store_array_free(&o);
        store_array_free(&f);
        return rc;
}

enum store_rc store_record(struct store *s, const char *ns, size_t n, const char *const *keys,
                           const char *const *statuses, const char *const *responses, char *err,
                           size_t errsz)
{
        struct store_array k = {0}, st = {0}, rs = {0};
        enum store_rc rc;

        if (n == 0)
                return STORE_OK;
        for (size_t i = 0; i < n; i++) {
                store_array_text(&k, keys[i]);
                store_array_text(&st, statuses[i]);
                store_array_text(&rs, responses[i]);
        }
        const char *params[4] = {ns, store_array_finish(&k), store_array_finish(&st),
                                 store_array_finish(&rs)};
        rc = run(s,
                 "UPDATE dedupd.keys AS d SET status = u.s, response = u.r, updated_at = now()"
                 " FROM unnest($2::text[], $3::text[], $4::text[]) AS u(k, s, r)"
                 " WHERE d.namespace = $1 AND d.idem_key = u.k",
                 4, params, NULL, err, errsz);
        store_array_free(&k);
        store_array_free(&st);
        store_array_free(&rs);
        return rc;
}

enum store_rc store_outcomes(struct store *s, const char *ns, size_t n, const char *const *keys,
                             store_outcome_cb *cb, void *opaque, char *err, size_t errsz)
{
        struct store_array k = {0};
        PGresult *r = NULL;
        enum store_rc rc;

        if (n == 0)
                return STORE_OK;
        for (size_t i = 0; i < n; i++)
                store_array_text(&k, keys[i]);
        const char *params[2] = {ns, store_array_finish(&k)};
        rc = run(s,
                 "SELECT idem_key, status, response, encode(fingerprint, 'hex') FROM dedupd.keys"
                 " WHERE namespace = $1 AND idem_key = ANY($2::text[])",
                 2, params, &r, err, errsz);
        if (rc == STORE_OK) {
                for (int row = 0; row < PQntuples(r); row++)
                        cb(opaque, PQgetvalue(r, row, 0), PQgetvalue(r, row, 1),
                           PQgetisnull(r, row, 2) ? NULL : PQgetvalue(r, row, 2),
                           PQgetisnull(r, row, 3) ? NULL : PQgetvalue(r, row, 3));
                PQclear(r);
        }
        store_array_free(&k);
        return rc;
}

enum store_rc store_progress(struct store *s, const char *ns, size_t n,
                             const struct store_progress *p, char *err, size_t errsz)
{
        struct store_array a[10] = {{0}};
        enum store_rc rc;

        if (n == 0)
                return STORE_OK;
        for (size_t i = 0; i < n; i++) {
                store_array_text(&a[0], p[i].topic);
                store_array_int(&a[1], p[i].partition);
                store_array_int(&a[2], p[i].next_offset);
                store_array_int(&a[3], p[i].consumed);
                store_array_int(&a[4], p[i].applied);
                store_array_int(&a[5], p[i].rejected);
                store_array_int(&a[6], p[i].duplicates);
                store_array_int(&a[7], p[i].dead_lettered);
                store_array_int(&a[8], p[i].from_offset);
                store_array_int(&a[9], p[i].mismatches);
        }
        const char *params[11] = {ns};
        for (int i = 0; i < 10; i++)
                params[i + 1] = store_array_finish(&a[i]);
        /* Sorted by partition so concurrent owners (a zombie and its
         * successor) lock rows in the same order. GREATEST: never backwards. */
        rc = run(s,
                 "WITH u AS (SELECT * FROM unnest($2::text[], $3::int[], $4::bigint[], $5::bigint[],"
                 " $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[])"
                 " AS u(t, p, o, c, a, r, d, q, f, m)),"
                 " log AS (INSERT INTO dedupd.progress_log (namespace, topic, partition, from_offset,"
                 " next_offset, consumed, applied, rejected, duplicates, dead_lettered, mismatches)"
                 " SELECT $1, t, p, f, o, c, a, r, d, q, m FROM u)"
                 " INSERT INTO dedupd.offsets AS o (namespace, topic, partition, next_offset, consumed,"
                 " applied, rejected, duplicates, dead_lettered, mismatches)"
                 " SELECT $1, u.t, u.p, u.o, u.c, u.a, u.r, u.d, u.q, u.m FROM u"
                 " ORDER BY u.t, u.p"
                 " ON CONFLICT (namespace, topic, partition) DO UPDATE SET"
                 " next_offset = GREATEST(o.next_offset, EXCLUDED.next_offset),"
                 " consumed = o.consumed + EXCLUDED.consumed,"
                 " applied = o.applied + EXCLUDED.applied,"
                 " rejected = o.rejected + EXCLUDED.rejected,"
                 " duplicates = o.duplicates + EXCLUDED.duplicates,"
                 " dead_lettered = o.dead_lettered + EXCLUDED.dead_lettered,"
                 " mismatches = o.mismatches + EXCLUDED.mismatches,"
                 " updated_at = now()",
                 11, params, NULL, err, errsz);
        for (int i = 0; i < 10; i++)
                store_array_free(&a[i]);
        return rc;
}

enum store_rc store_offsets_get(struct store *s, const char *ns, const char *topic, size_t n,
                                const int32_t *parts, int64_t *out, char *err, size_t errsz)
{
        PGresult *r = NULL;
        const char *params[2] = {ns, topic};
        enum store_rc rc;

        for (size_t i = 0; i < n; i++)
                out[i] = -1;
        rc = run(s,
                 "SELECT partition, next_offset FROM dedupd.offsets WHERE namespace = $1 AND topic = $2",
                 2, params, &r, err, errsz);
        if (rc)
                return rc;
        for (int row = 0; row < PQntuples(r); row++) {
                int32_t part = (int32_t)atoi(PQgetvalue(r, row, 0));
                for (size_t i = 0; i < n; i++)
                        if (parts[i] == part)
                                out[i] = strtoll(PQgetvalue(r, row, 1), NULL, 10);
        }
        PQclear(r);
        return STORE_OK;
}

/* The ledger row's key columns as text parameters. */
struct attempt_params {
        char part[16], offset[24], extra[24];
};

static void attempt_params(struct attempt_params *ap, int32_t partition, int64_t offset, int64_t extra)
{
        snprintf(ap->part, sizeof(ap->part), "%" PRId32, partition);
        snprintf(ap->offset, sizeof(ap->offset), "%" PRId64, offset);
        snprintf(ap->extra, sizeof(ap->extra), "%" PRId64, extra);
}

enum store_rc store_attempt_covering(struct store *s, const char *ns, const char *topic, int32_t partition,
                                     int64_t offset, int *found, int *attempts, int64_t *until, char *err,
                                     size_t errsz)
{
        struct attempt_params ap;
        PGresult *r = NULL;
        enum store_rc rc;

        attempt_params(&ap, partition, offset, 0);
        const char *params[4] = {ns, topic, ap.part, ap.offset};
        rc = run(s,
                 "SELECT attempts, until_offset FROM dedupd.attempts"
                 " WHERE namespace = $1 AND topic = $2 AND partition = $3::int AND NOT single"
                 " AND \"offset\" <= $4::bigint AND until_offset > $4::bigint"
                 " ORDER BY \"offset\" DESC LIMIT 1",
                 4, params, &r, err, errsz);
        if (rc)
                return rc;
        *found = PQntuples(r) == 1;
        if (*found) {
                *attempts = atoi(PQgetvalue(r, 0, 0));
                *until = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        }
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_attempt_batch(struct store *s, const char *ns, const char *topic, int32_t partition,
                                  int64_t from, int64_t until, int *attempts, char *err, size_t errsz)
{
        struct attempt_params ap;
        PGresult *r = NULL;
        enum store_rc rc;

        attempt_params(&ap, partition, from, until);
        const char *params[5] = {ns, topic, ap.part, ap.offset, ap.extra};
        /* Autocommit: the count must survive the crash it is counting. */
        rc = run(s,
                 "INSERT INTO dedupd.attempts AS a (namespace, topic, partition, \"offset\", single, until_offset)"
                 " VALUES ($1, $2, $3::int, $4::bigint, false, $5::bigint)"
                 " ON CONFLICT (namespace, topic, partition, \"offset\", single) DO UPDATE SET"
                 " attempts = a.attempts + 1, last_at = now(),"
                 " until_offset = GREATEST(a.until_offset, EXCLUDED.until_offset)"
                 " RETURNING attempts",
                 5, params, &r, err, errsz);
        if (rc)
                return rc;
        *attempts = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_attempt_single(struct store *s, const char *ns, const char *topic, int32_t partition,
                                   int64_t offset, int inherited, int *attempts, int *inherited_out,
                                   char *err, size_t errsz)
{
        struct attempt_params ap;
        PGresult *r = NULL;
        enum store_rc rc;

        attempt_params(&ap, partition, offset, inherited);
        const char *params[5] = {ns, topic, ap.part, ap.offset, ap.extra};
        rc = run(s,
                 "INSERT INTO dedupd.attempts AS a (namespace, topic, partition, \"offset\", single,"
                 " until_offset, inherited)"
                 " VALUES ($1, $2, $3::int, $4::bigint, true, $4::bigint + 1, $5::int)"
                 " ON CONFLICT (namespace, topic, partition, \"offset\", single) DO UPDATE SET"
                 " attempts = a.attempts + 1, last_at = now()"
                 " RETURNING attempts, inherited",
                 5, params, &r, err, errsz);
        if (rc)
                return rc;
        *attempts = atoi(PQgetvalue(r, 0, 0));
        *inherited_out = atoi(PQgetvalue(r, 0, 1));
        PQclear(r);
        return STORE_OK;
}

enum store_rc store_attempt_release(struct store *s, const char *ns, const char *topic, int32_t partition,
                                    int64_t offset, int single, char *err, size_t errsz)
{
        struct attempt_params ap;
        enum store_rc rc;

        attempt_params(&ap, partition, offset, 0);
        const char *params[5] = {ns, topic, ap.part, ap.offset, single ? "true" : "false"};
        rc = run(s,
                 "UPDATE dedupd.attempts SET attempts = attempts - 1"
                 " WHERE namespace = $1 AND topic = $2 AND partition = $3::int AND \"offset\" = $4::bigint"
                 " AND single = $5::boolean",
                 5, params, NULL, err, errsz);
        if (rc)
                return rc;
        return run(s,
                   "DELETE FROM dedupd.attempts"
                   " WHERE namespace = $1 AND topic = $2 AND partition = $3::int AND \"offset\" = $4::bigint"
                   " AND single = $5::boolean AND attempts <= 0",
                   5, params, NULL, err, errsz);
}

enum store_rc store_attempts_done(struct store *s, const char *ns, const char *topic,
                                  int32_t partition, int64_t next_offset, char *err, size_t errsz)
{
        char part[16], n[24];
        const char *params[4] = {ns, topic, part, n};
        snprintf(part, sizeof(part), "%" PRId32, partition);
        snprintf(n, sizeof(n), "%" PRId64, next_offset);
        return run(s,
                   "DELETE FROM dedupd.attempts WHERE namespace = $1 AND topic = $2"
                   " AND partition = $3::int AND until_offset <= $4::bigint",
                   4, params, NULL, err, errsz);
}
