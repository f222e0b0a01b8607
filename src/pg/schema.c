/* schema: the numbered migrations that create and change schema dedupd, applied at start and by dedupctl migrate. */
#include "pg/schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

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
        /* 6: a key stored as sha256:<hex> (longer than 512 bytes) keeps its
         *    text, for dedupctl inspect; NULL for a key stored as it is */
        "ALTER TABLE dedupd.keys ADD COLUMN IF NOT EXISTS key_text text;",
        /* 7: an outbox row the broker refuses is retried with backoff, then
         *    given up, and never holds back the rows behind it; sent rows are
         *    purged by age (outbox.keep) */
        "ALTER TABLE dedupd.outbox ADD COLUMN IF NOT EXISTS failures integer NOT NULL DEFAULT 0;"
        "ALTER TABLE dedupd.outbox ADD COLUMN IF NOT EXISTS last_error text;"
        "ALTER TABLE dedupd.outbox ADD COLUMN IF NOT EXISTS retry_at timestamptz;"
        "ALTER TABLE dedupd.outbox ADD COLUMN IF NOT EXISTS given_up_at timestamptz;"
        "DROP INDEX IF EXISTS dedupd.outbox_unsent;"
        "CREATE INDEX IF NOT EXISTS outbox_unsent ON dedupd.outbox (namespace, id)"
        "  WHERE sent_at IS NULL AND given_up_at IS NULL;"
        "CREATE INDEX IF NOT EXISTS outbox_given_up ON dedupd.outbox (namespace, id) WHERE given_up_at IS NOT NULL;"
        "CREATE INDEX IF NOT EXISTS outbox_sent ON dedupd.outbox (namespace, sent_at) WHERE sent_at IS NOT NULL;",
        /* 8: the commit guard — a batch's transaction is committed by dedupd
         *    alone: the claim puts a row here, dedupd takes it off after the
         *    handler, and a COMMIT that finds it still there (a handler ran
         *    COMMIT) fails, so the batch rolls back whole */
        "CREATE TABLE IF NOT EXISTS dedupd.txn_guard (xid xid8 PRIMARY KEY);"
        "CREATE OR REPLACE FUNCTION dedupd.txn_guard_check() RETURNS trigger LANGUAGE plpgsql"
        "  SET search_path = pg_catalog AS $f$"
        " BEGIN"
        "  IF EXISTS (SELECT 1 FROM dedupd.txn_guard g WHERE g.xid = NEW.xid) THEN"
        "   RAISE EXCEPTION 'dedupd: a batch''s transaction is committed by dedupd alone (its handler ran COMMIT)'"
        "    USING ERRCODE = 'P0001';"
        "  END IF;"
        "  RETURN NULL;"
        " END $f$;"
        "CREATE CONSTRAINT TRIGGER txn_guard AFTER INSERT ON dedupd.txn_guard"
        "  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION dedupd.txn_guard_check();",
        /* 9: the crash-loop ledger tells its own attempts from a live peer's
         *    (issue 16): each row carries its owner, and each running dedupd
         *    its liveness lease and database session; rows written before
         *    this migration have owner '' and count as crashes, as before */
        "CREATE TABLE IF NOT EXISTS dedupd.instances ("
        "  owner         text        PRIMARY KEY,"
        "  namespace     text        NOT NULL,"
        "  backend_pid   integer     NOT NULL,"
        "  backend_start timestamptz,"
        "  started_at    timestamptz NOT NULL DEFAULT now(),"
        "  lease_until   timestamptz NOT NULL"
        ");"
        "ALTER TABLE dedupd.attempts ADD COLUMN IF NOT EXISTS owner text NOT NULL DEFAULT '';"
        "ALTER TABLE dedupd.attempts DROP CONSTRAINT IF EXISTS attempts_pkey;"
        "ALTER TABLE dedupd.attempts ADD PRIMARY KEY (namespace, topic, partition, \"offset\", single, owner);",
        /* 10: each outbox row carries the identity a downstream dedups on
         *    (issue 17), derived from its key and its place among the key's
         *    outputs (base/msgid.h), so a row written again after a replay or
         *    a failover goes out as the same message. NULL: a row written
         *    before (or by hand) keeps the identity it had, its sequence id —
         *    read so, rather than backfilled, which would rewrite a table of
         *    sent rows under the migration's lock. No unique index: the same
         *    identity is written again, legitimately, while its first row is
         *    still kept (a key purged and applied again, a duplicate answered
         *    again by a replay), and the downstream absorbs it by design. */
        "ALTER TABLE dedupd.outbox ADD COLUMN IF NOT EXISTS msg_id text;"
        /* What every broker takes as an id (base/msgid.h, MSGID_MAX); NOT
         * VALID: the rows already there are NULL, no need to scan them. */
        "ALTER TABLE dedupd.outbox ADD CONSTRAINT outbox_msg_id_ascii"
        "  CHECK (msg_id ~ '^[!-~]{1,200}$') NOT VALID;",
        /* 11: each fingerprint mismatch (same key, another payload) is kept
         *    with its key and origin, for dedupctl verify and stats (the
         *    counters in dedupd.offsets say how many, not which); a record
         *    delivered again is the same row. Purged with progress_log. */
        "CREATE TABLE IF NOT EXISTS dedupd.mismatches ("
        "  namespace         text        NOT NULL,"
        "  topic             text        NOT NULL,"
        "  partition         integer     NOT NULL,"
        "  \"offset\"          bigint      NOT NULL,"
        "  idem_key          text        NOT NULL,"
        "  first_fingerprint text        NOT NULL,"
        "  fingerprint       text        NOT NULL,"
        "  verdict           text        NOT NULL,"
        "  noticed_at        timestamptz NOT NULL DEFAULT now(),"
        "  PRIMARY KEY (namespace, topic, partition, \"offset\")"
        ");"
        "CREATE INDEX IF NOT EXISTS mismatches_time ON dedupd.mismatches (namespace, noticed_at);",
        /* 12: where each topic's handler counts its effects (issue 20): what
         *    it declared at init with host->set_evidence, for dedupctl
         *    verify, which runs in another process and cannot ask it */
        "CREATE TABLE IF NOT EXISTS dedupd.evidence ("
        "  namespace   text        NOT NULL,"
        "  topic       text        NOT NULL,"
        "  handler     text        NOT NULL,"
        "  table_name  text        NOT NULL,"
        "  key_column  text        NOT NULL,"
        "  declared_at timestamptz NOT NULL DEFAULT now(),"
        "  PRIMARY KEY (namespace, topic)"
        ");",
        /* 13: how many times reconcile() was asked about an in-doubt
         *    (EXPIRED) key (issue 21): the reaper stops asking after
         *    external.reconcile_tries. A constant default: no table rewrite */
        "ALTER TABLE dedupd.keys ADD COLUMN IF NOT EXISTS reconciled integer NOT NULL DEFAULT 0;",
        /* 14: an operator's audited re-runs of a key (dedupctl rerun, issue
         *    21), and FAILED keys on_failed: retry runs again: who, why,
         *    and the outcome the key had before */
        "CREATE TABLE IF NOT EXISTS dedupd.reruns ("
        "  namespace       text        NOT NULL,"
        "  idem_key        text        NOT NULL,"
        "  generation      integer     NOT NULL,"
        "  mode            text        NOT NULL CHECK (mode IN ('reexecute', 'emit-only', 'on-failed')),"
        "  requested_at    timestamptz NOT NULL DEFAULT now(),"
        "  requested_by    text        NOT NULL,"
        "  db_user         text        NOT NULL DEFAULT session_user,"
        "  reason          text        NOT NULL CHECK (reason <> ''),"
        "  outbox_rows     integer     NOT NULL DEFAULT 0,"
        "  prev_status     text        NOT NULL,"
        "  prev_response   text,"
        "  prev_attempts   integer,"
        "  prev_topic      text,"
        "  prev_partition  integer,"
        "  prev_offset     bigint,"
        "  prev_created_at timestamptz,"
        "  PRIMARY KEY (namespace, idem_key, generation)"
        ");",
        /* 15: parallel keys inside a partition (issue 21 §3): each worker's
         *    position, written with its effects; the partition's position
         *    is the least of its workers' (pg/parallel_positions.h) */
        "CREATE TABLE IF NOT EXISTS dedupd.parallel_positions ("
        "  namespace   text        NOT NULL,"
        "  topic       text        NOT NULL,"
        "  partition   integer     NOT NULL,"
        "  layout      text        NOT NULL,"
        "  worker      integer     NOT NULL,"
        "  next_offset bigint      NOT NULL,"
        "  updated_at  timestamptz NOT NULL DEFAULT now(),"
        "  PRIMARY KEY (namespace, topic, partition, layout, worker)"
        ");",
        /* 16: where duplicates come from (issue 21 §5): a sample of the
         *    absorbed ones, with the first delivery they repeat, written in
         *    the batch's transaction (pg/duplicates.h); purged with the
         *    progress */
        "CREATE TABLE IF NOT EXISTS dedupd.duplicates ("
        "  namespace       text        NOT NULL,"
        "  topic           text        NOT NULL,"
        "  idem_key        text        NOT NULL,"
        "  partition       integer     NOT NULL,"
        "  \"offset\"        bigint      NOT NULL,"
        "  origin          text        NOT NULL,"
        "  first_topic     text        NOT NULL,"
        "  first_partition integer     NOT NULL,"
        "  first_offset    bigint      NOT NULL,"
        "  source          text,"
        "  delay_ms        bigint      NOT NULL,"
        "  seen_at         timestamptz NOT NULL DEFAULT now()"
        ");"
        "CREATE INDEX IF NOT EXISTS duplicates_seen ON dedupd.duplicates (namespace, seen_at);",
        /* 17: tenants (issue 21 §2): each tenant's live keys per topic and
         *    partition (a partition's batches touch only its own row), added
         *    in the batch's transaction, taken back by whatever deletes a
         *    tenant's keys (pg/tenants.h) */
        "CREATE TABLE IF NOT EXISTS dedupd.tenant_usage ("
        "  namespace  text        NOT NULL,"
        "  tenant     text        NOT NULL,"
        "  topic      text        NOT NULL,"
        "  partition  integer     NOT NULL,"
        "  live       bigint      NOT NULL,"
        "  updated_at timestamptz NOT NULL DEFAULT now(),"
        "  PRIMARY KEY (namespace, tenant, topic, partition)"
        ");",
        /* 18: keys kept by bucket (keys.layout: partitioned, issue 21 §1):
         *    dedupd.keys' columns in a table partitioned by namespace and key,
         *    whose keys begin with their bucket ("@2026-12-01|9527/PAY"), so a
         *    key and all its duplicates share one partition, one per bucket
         *    and namespace, and retention drops whole partitions. The key's
         *    collation is "C", the partitions' own, so every statement on
         *    dedupd.keys runs unchanged on it and prunes to one partition.
         *    Partitions are made and dropped by two functions that run as
         *    the schema's owner (a role that owns nothing runs dedupd) and
         *    record each in dedupd.key_partitions, dropped ones too: a bucket
         *    dropped is never made again (pg/key_buckets.h) */
        "CREATE TABLE IF NOT EXISTS dedupd.keys_p ("
        "  namespace           text        NOT NULL,"
        "  idem_key            text        COLLATE \"C\" NOT NULL,"
        "  status              text        NOT NULL CHECK (status IN ('PENDING','DONE','FAILED','EXPIRED')),"
        "  fingerprint         bytea,"
        "  response            text,"
        "  topic               text,"
        "  partition           integer,"
        "  \"offset\"            bigint,"
        "  attempts            integer     NOT NULL DEFAULT 1,"
        "  owner               text,"
        "  lease_until         timestamptz,"
        "  created_at          timestamptz NOT NULL DEFAULT now(),"
        "  updated_at          timestamptz NOT NULL DEFAULT now(),"
        "  expires_at          timestamptz,"
        "  response_expires_at timestamptz,"
        "  key_text            text,"
        "  reconciled          integer     NOT NULL DEFAULT 0"
        ") PARTITION BY RANGE (namespace, idem_key);"
        "CREATE UNIQUE INDEX IF NOT EXISTS keys_p_pkey ON dedupd.keys_p (namespace, idem_key);"
        "CREATE INDEX IF NOT EXISTS keys_p_response_expiry ON dedupd.keys_p (namespace, response_expires_at)"
        "  WHERE response IS NOT NULL AND response_expires_at IS NOT NULL;"
        "CREATE INDEX IF NOT EXISTS keys_p_pending ON dedupd.keys_p (namespace, lease_until)"
        "  WHERE status = 'PENDING';"
        "CREATE TABLE IF NOT EXISTS dedupd.key_partitions ("
        "  namespace    text        NOT NULL,"
        "  bucket       date        NOT NULL,"
        "  until        date        NOT NULL,"
        "  relname      text        NOT NULL,"
        "  created_at   timestamptz NOT NULL DEFAULT now(),"
        "  dropped_at   timestamptz,"
        "  rows_dropped bigint,"
        "  PRIMARY KEY (namespace, bucket)"
        ");"
        "CREATE OR REPLACE FUNCTION dedupd.key_partition_create(ns text, b date, e date) RETURNS boolean"
        "  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $f$"
        " DECLARE rel text := 'keys_p_' || substr(md5(ns), 1, 12) || '_' || to_char(b, 'YYYYMMDD');"
        " BEGIN"
        "  PERFORM pg_advisory_xact_lock(hashtext('dedupd.key_partitions'));"
        "  IF EXISTS (SELECT 1 FROM dedupd.key_partitions p WHERE p.namespace = ns AND p.bucket = b) THEN"
        "   RETURN false;"
        "  END IF;"
        "  EXECUTE format('CREATE TABLE dedupd.%I PARTITION OF dedupd.keys_p FOR VALUES FROM (%L, %L) TO (%L, %L)"
        " WITH (fillfactor = 85)', rel, ns, '@' || to_char(b, 'YYYY-MM-DD') || '|', ns,"
        "   '@' || to_char(e, 'YYYY-MM-DD') || '|');"
        "  INSERT INTO dedupd.key_partitions (namespace, bucket, until, relname) VALUES (ns, b, e, rel);"
        "  RETURN true;"
        " END $f$;"
        "CREATE OR REPLACE FUNCTION dedupd.key_partition_drop(ns text, b date) RETURNS bigint"
        "  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog SET lock_timeout = '10s' AS $f$"
        " DECLARE rel text; n bigint;"
        " BEGIN"
        "  SELECT p.relname INTO rel FROM dedupd.key_partitions p"
        "   WHERE p.namespace = ns AND p.bucket = b AND p.dropped_at IS NULL FOR UPDATE;"
        "  IF NOT FOUND THEN RETURN NULL; END IF;"
        "  EXECUTE format('SELECT count(*) FROM dedupd.%I', rel) INTO n;"
        "  EXECUTE format('DROP TABLE dedupd.%I', rel);"
        "  UPDATE dedupd.key_partitions p SET dropped_at = now(), rows_dropped = n"
        "   WHERE p.namespace = ns AND p.bucket = b;"
        "  RETURN n;"
        " END $f$;"
        "REVOKE ALL ON FUNCTION dedupd.key_partition_create(text, date, date) FROM PUBLIC;"
        "REVOKE ALL ON FUNCTION dedupd.key_partition_drop(text, date) FROM PUBLIC;",
};
#define MIGRATION_CNT ((int)(sizeof(migrations) / sizeof(migrations[0])))

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
            (rc = store_query(s, "SELECT coalesce(max(version), 0) FROM dedupd.schema_migrations", 0, NULL, &r, err,
                              errsz)))
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
                if ((rc = store_exec_as_written(s, migrations[v - 1], err, errsz)) ||
                    (rc = store_query(s, "INSERT INTO dedupd.schema_migrations (version) VALUES ($1::int)", 1, params,
                                      NULL, err, errsz)))
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
        /* Two statements: one naming a missing table fails as it is parsed. */
        if (store_query(s, "SELECT to_regclass('dedupd.schema_migrations') IS NOT NULL", 0, NULL, &r, err, errsz))
                return -1;
        int exists = PQgetvalue(r, 0, 0)[0] == 't';
        PQclear(r);
        if (!exists)
                return 0;
        if (store_query(s, "SELECT coalesce(max(version), 0) FROM dedupd.schema_migrations", 0, NULL, &r, err, errsz))
                return -1;
        *applied = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
        return 0;
}

/* ---- the shape the migrations build ---------------------------------------------- */

/*
 * Schema dedupd after every migration, one row per column as PostgreSQL's
 * catalog names it: the one place to read the shape of dedupd.keys. A
 * migration that changes a table changes this list; store_schema_check
 * holds the two together.
 */
static const struct schema_column {
        const char *table, *column, *type;
        int nullable;
} schema[] = {
        {"attempts", "attempts", "integer", 0},
        {"attempts", "inherited", "integer", 0}, /* crashes of the batches an isolated message was in */
        {"attempts", "last_at", "timestamp with time zone", 0},
        {"attempts", "namespace", "text", 0},
        {"attempts", "offset", "bigint", 0},
        {"attempts", "owner", "text", 0}, /* the instance that counted it (dedupd.instances), '' before migration 8 */
        {"attempts", "partition", "integer", 0},
        {"attempts", "single", "boolean", 0}, /* a message run alone, or a batch's start */
        {"attempts", "topic", "text", 0},
        {"attempts", "until_offset", "bigint", 0},
        {"duplicates", "delay_ms", "bigint", 0}, /* since the key's first delivery was claimed */
        {"duplicates", "first_offset", "bigint", 0},
        {"duplicates", "first_partition", "integer", 0},
        {"duplicates", "first_topic", "text", 0},
        {"duplicates", "idem_key", "text", 0},
        {"duplicates", "namespace", "text", 0},
        {"duplicates", "offset", "bigint", 0},
        {"duplicates", "origin", "text", 0}, /* redelivery, same-partition, other-partition, other-topic */
        {"duplicates", "partition", "integer", 0},
        {"duplicates", "seen_at", "timestamp with time zone", 0},
        {"duplicates", "source", "text", 1}, /* provenance.header's value; NULL: none */
        {"duplicates", "topic", "text", 0},
        {"evidence", "declared_at", "timestamp with time zone", 0},
        {"evidence", "handler", "text", 0},
        {"evidence", "key_column", "text", 0}, /* host->set_evidence's key_column */
        {"evidence", "namespace", "text", 0},
        {"evidence", "table_name", "text", 0}, /* host->set_evidence's table, as declared (maybe schema.table) */
        {"evidence", "topic", "text", 0},
        {"instances", "backend_pid", "integer", 0}, /* its database session: gone when the process dies */
        {"instances", "backend_start", "timestamp with time zone", 1},
        {"instances", "lease_until", "timestamp with time zone", 0}, /* renewed while it runs */
        {"instances", "namespace", "text", 0},
        {"instances", "owner", "text", 0}, /* hostname:pid:random */
        {"instances", "started_at", "timestamp with time zone", 0},
        {"key_partitions", "bucket", "date", 0}, /* the bucket's first day: its keys begin "@YYYY-MM-DD|" */
        {"key_partitions", "created_at", "timestamp with time zone", 0},
        {"key_partitions", "dropped_at", "timestamp with time zone", 1}, /* NULL: live */
        {"key_partitions", "namespace", "text", 0},
        {"key_partitions", "relname", "text", 0},
        {"key_partitions", "rows_dropped", "bigint", 1},
        {"key_partitions", "until", "date", 0}, /* the next bucket's first day */
        {"keys", "attempts", "integer", 0},
        {"keys", "created_at", "timestamp with time zone", 0},
        {"keys", "expires_at", "timestamp with time zone", 1}, /* NULL: kept forever */
        {"keys", "fingerprint", "bytea", 1},
        {"keys", "idem_key", "text", 0},
        {"keys", "key_text", "text", 1},                        /* the text of a hashed key */
        {"keys", "lease_until", "timestamp with time zone", 1}, /* external mode */
        {"keys", "namespace", "text", 0},
        {"keys", "offset", "bigint", 1},
        {"keys", "owner", "text", 1}, /* external mode */
        {"keys", "partition", "integer", 1},
        {"keys", "reconciled", "integer", 0}, /* reconcile() answers on an EXPIRED key */
        {"keys", "response", "text", 1},
        {"keys", "response_expires_at", "timestamp with time zone", 1},
        {"keys", "status", "text", 0}, /* PENDING, DONE, FAILED, EXPIRED */
        {"keys", "topic", "text", 1},
        {"keys", "updated_at", "timestamp with time zone", 0},
        {"keys_p", "attempts", "integer", 0},
        {"keys_p", "created_at", "timestamp with time zone", 0},
        {"keys_p", "expires_at", "timestamp with time zone", 1},
        {"keys_p", "fingerprint", "bytea", 1},
        {"keys_p", "idem_key", "text", 0},
        {"keys_p", "key_text", "text", 1},
        {"keys_p", "lease_until", "timestamp with time zone", 1},
        {"keys_p", "namespace", "text", 0},
        {"keys_p", "offset", "bigint", 1},
        {"keys_p", "owner", "text", 1},
        {"keys_p", "partition", "integer", 1},
        {"keys_p", "reconciled", "integer", 0},
        {"keys_p", "response", "text", 1},
        {"keys_p", "response_expires_at", "timestamp with time zone", 1},
        {"keys_p", "status", "text", 0},
        {"keys_p", "topic", "text", 1},
        {"keys_p", "updated_at", "timestamp with time zone", 0},
        {"mismatches", "fingerprint", "text", 0},
        {"mismatches", "first_fingerprint", "text", 0},
        {"mismatches", "idem_key", "text", 0},
        {"mismatches", "namespace", "text", 0},
        {"mismatches", "noticed_at", "timestamp with time zone", 0},
        {"mismatches", "offset", "bigint", 0},
        {"mismatches", "partition", "integer", 0},
        {"mismatches", "topic", "text", 0},
        {"mismatches", "verdict", "text", 0}, /* absorbed, dead-lettered */
        {"offsets", "applied", "bigint", 0},
        {"offsets", "consumed", "bigint", 0},
        {"offsets", "dead_lettered", "bigint", 0},
        {"offsets", "duplicates", "bigint", 0},
        {"offsets", "mismatches", "bigint", 0},
        {"offsets", "namespace", "text", 0},
        {"offsets", "next_offset", "bigint", 0},
        {"offsets", "partition", "integer", 0},
        {"offsets", "rejected", "bigint", 0},
        {"offsets", "topic", "text", 0},
        {"offsets", "updated_at", "timestamp with time zone", 0},
        {"outbox", "created_at", "timestamp with time zone", 0},
        {"outbox", "failures", "integer", 0}, /* publishes the broker refused since the last retry */
        {"outbox", "given_up_at", "timestamp with time zone", 1}, /* set: no more attempts (dedupctl outbox retry) */
        {"outbox", "header_names", "ARRAY", 0},
        {"outbox", "header_values", "ARRAY", 0},
        {"outbox", "id", "bigint", 0},
        {"outbox", "idem_key", "text", 1},
        {"outbox", "key", "bytea", 1},
        {"outbox", "last_error", "text", 1}, /* why the last publish failed */
        {"outbox", "msg_id", "text", 1},     /* the identity it goes out with; NULL: its id, as before migration 10 */
        {"outbox", "namespace", "text", 0},
        {"outbox", "retry_at", "timestamp with time zone", 1}, /* a failed row waits until then */
        {"outbox", "sent_at", "timestamp with time zone", 1},  /* NULL until the broker acknowledged it */
        {"outbox", "topic", "text", 0},
        {"outbox", "value", "bytea", 1},
        {"parallel_positions", "layout", "text", 0}, /* "<workers>:<key template>" */
        {"parallel_positions", "namespace", "text", 0},
        {"parallel_positions", "next_offset", "bigint", 0},
        {"parallel_positions", "partition", "integer", 0},
        {"parallel_positions", "topic", "text", 0},
        {"parallel_positions", "updated_at", "timestamp with time zone", 0},
        {"parallel_positions", "worker", "integer", 0},
        {"progress_log", "applied", "bigint", 0},
        {"progress_log", "committed_at", "timestamp with time zone", 0},
        {"progress_log", "consumed", "bigint", 0},
        {"progress_log", "dead_lettered", "bigint", 0},
        {"progress_log", "duplicates", "bigint", 0},
        {"progress_log", "from_offset", "bigint", 0},
        {"progress_log", "mismatches", "bigint", 0},
        {"progress_log", "namespace", "text", 0},
        {"progress_log", "next_offset", "bigint", 0},
        {"progress_log", "partition", "integer", 0},
        {"progress_log", "rejected", "bigint", 0},
        {"progress_log", "topic", "text", 0},
        {"reruns", "db_user", "text", 0},
        {"reruns", "generation", "integer", 0},
        {"reruns", "idem_key", "text", 0},
        {"reruns", "mode", "text", 0}, /* reexecute, emit-only, on-failed */
        {"reruns", "namespace", "text", 0},
        {"reruns", "outbox_rows", "integer", 0},
        {"reruns", "prev_attempts", "integer", 1},
        {"reruns", "prev_created_at", "timestamp with time zone", 1},
        {"reruns", "prev_offset", "bigint", 1},
        {"reruns", "prev_partition", "integer", 1},
        {"reruns", "prev_response", "text", 1},
        {"reruns", "prev_status", "text", 0},
        {"reruns", "prev_topic", "text", 1},
        {"reruns", "reason", "text", 0},
        {"reruns", "requested_at", "timestamp with time zone", 0},
        {"reruns", "requested_by", "text", 0},
        {"schema_migrations", "applied_at", "timestamp with time zone", 0},
        {"schema_migrations", "version", "integer", 0},
        {"tenant_usage", "live", "bigint", 0}, /* keys claimed and not yet deleted */
        {"tenant_usage", "namespace", "text", 0},
        {"tenant_usage", "partition", "integer", 0},
        {"tenant_usage", "tenant", "text", 0},
        {"tenant_usage", "topic", "text", 0},
        {"tenant_usage", "updated_at", "timestamp with time zone", 0},
        {"txn_guard", "xid", "xid8", 0}, /* a batch's transaction between its claim and its handler's end */
};
#define SCHEMA_COLUMNS (sizeof(schema) / sizeof(schema[0]))

/* How many tables the list describes (it is sorted by table). */
static size_t schema_tables(void)
{
        size_t n = 0;
        for (size_t i = 0; i < SCHEMA_COLUMNS; i++)
                n += i == 0 || strcmp(schema[i].table, schema[i - 1].table) != 0;
        return n;
}

static int column_cmp(const char *t1, const char *c1, const char *t2, const char *c2)
{
        int c = strcmp(t1, t2);
        return c ? c : strcmp(c1, c2);
}

/* Append one difference to the report. */
static void differ(char *report, size_t sz, int *n, const char *what, const char *table, const char *column,
                   const char *detail)
{
        size_t at = strlen(report);
        if (at < sz)
                snprintf(report + at, sz - at, "%s%s dedupd.%s.%s%s", *n ? "; " : "", what, table, column, detail);
        (*n)++;
}

enum store_rc store_schema_check(struct store *s, int *differences, char *report, size_t reportsz, char *err,
                                 size_t errsz)
{
        PGresult *r = NULL;
        enum store_rc rc = store_query(s,
                                       "SELECT table_name, column_name, data_type, is_nullable = 'YES'"
                                       " FROM information_schema.columns WHERE table_schema = 'dedupd'"
                                       /* dedupd.keys_p's partitions are its own shape */
                                       " AND NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.relispartition"
                                       "  AND c.oid = to_regclass(format('dedupd.%I', table_name)))"
                                       " ORDER BY table_name COLLATE \"C\", column_name COLLATE \"C\"",
                                       0, NULL, &r, err, errsz);
        if (rc)
                return rc;
        size_t i = 0;
        int row = 0, rows = PQntuples(r);
        *differences = 0;
        report[0] = '\0';
        while (i < SCHEMA_COLUMNS || row < rows) {
                const struct schema_column *want = i < SCHEMA_COLUMNS ? &schema[i] : NULL;
                const char *t = row < rows ? PQgetvalue(r, row, 0) : NULL,
                           *c = row < rows ? PQgetvalue(r, row, 1) : NULL;
                int cmp = !want ? 1 : !t ? -1 : column_cmp(want->table, want->column, t, c);
                if (cmp < 0) {
                        differ(report, reportsz, differences, "missing", want->table, want->column, "");
                        i++;
                } else if (cmp > 0) {
                        differ(report, reportsz, differences, "not described", t, c, "");
                        row++;
                } else {
                        char detail[160];
                        int nullable = !strcmp(PQgetvalue(r, row, 3), "t");
                        snprintf(detail, sizeof(detail), " (%s%s, described %s%s)", PQgetvalue(r, row, 2),
                                 nullable ? " NULL" : " NOT NULL", want->type, want->nullable ? " NULL" : " NOT NULL");
                        if (strcmp(want->type, PQgetvalue(r, row, 2)) || want->nullable != nullable)
                                differ(report, reportsz, differences, "differs:", t, c, detail);
                        i++;
                        row++;
                }
        }
        PQclear(r);
        if (!*differences)
                snprintf(report, reportsz, "%zu columns in %zu tables, as described", SCHEMA_COLUMNS, schema_tables());
        return STORE_OK;
}
