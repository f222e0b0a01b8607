/* audit: what dedupctl reads to audit and report — a key's record, keys by status, counters, keys in doubt, a handler's evidence. */
#ifndef DEDUPD_PG_AUDIT_H
#define DEDUPD_PG_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "pg/store.h"

/*
 * Each returns its rows in *out (PQclear it) for the tool to print; the
 * columns are named in each comment. Read-only, autocommit.
 */

/** 1 in *exists when the relation (e.g. "dedupd.progress_log") exists. */
enum store_rc store_relation_exists(struct store *s, const char *name, int *exists, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** One key's record: every column of dedupd.keys worth showing, by name. */
enum store_rc store_audit_key(struct store *s, const char *ns, const char *key, PGresult **out, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** status, count — keys of ns by status. */
enum store_rc store_audit_statuses(struct store *s, const char *ns, PGresult **out, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** topic, partition, next_offset and the counters of dedupd.offsets. */
enum store_rc store_audit_partitions(struct store *s, const char *ns, PGresult **out, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** idem_key, status, topic, partition, offset, since — EXPIRED keys and
 *  PENDING ones older than 10 minutes. */
enum store_rc store_audit_in_doubt(struct store *s, const char *ns, PGresult **out, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** consumed, applied, rejected, duplicates, dead_lettered, DONE keys, FAILED
 *  keys, keys — all time. */
enum store_rc store_audit_counters(struct store *s, const char *ns, PGresult **out, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** consumed, applied, rejected, duplicates, dead_lettered, batches, since
 *  (as text) — batches committed at or after since_ms. */
enum store_rc store_audit_since(struct store *s, const char *ns, int64_t since_ms, PGresult **out, char *err,
                                size_t errsz) __attribute__((warn_unused_result));

/** The three checks of a handler's evidence: one row per effect in table,
 *  keyed by key_column. */
enum store_evidence_check {
        EVIDENCE_TWO_EFFECTS,  /* keys with more than one effect */
        EVIDENCE_DONE_WITHOUT, /* DONE keys of the topics with none */
        EVIDENCE_FAILED_WITH,  /* FAILED keys with one */
};
#define STORE_EVIDENCE_CHECKS 3

/** idem_key, effects, topic, partition, offset — the keys failing check
 *  for the handler whose evidence is table(key_column), on its topics. The
 *  table and column come from what the handler declared (pg/evidence.h),
 *  never from a message; they are quoted as identifiers (table may be
 *  schema.table). */
enum store_rc store_audit_evidence(struct store *s, const char *ns, const char *table, const char *key_column,
                                   const char *const *topics, size_t ntopics, enum store_evidence_check check,
                                   PGresult **out, char *err, size_t errsz) __attribute__((warn_unused_result));

/** dedupd.mismatches (written by pg/mismatches): how many the namespace holds and the newest `examples`; one row
 *  with the count (column 0), then a row per example (key, topic, partition,
 *  offset, "absorbed at TIME" or "dead-lettered at TIME"); the caller PQclears both. */
enum store_rc store_mismatch_summary(struct store *s, const char *ns, int examples, PGresult **count, PGresult **rows,
                                     char *err, size_t errsz) __attribute__((warn_unused_result));

#endif
