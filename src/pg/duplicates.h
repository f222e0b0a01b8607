/* duplicates: where absorbed duplicates come from — the sampled ones written after their batches committed, the report dedupctl dupes prints, and the continuous absorption check's sample. */
#ifndef DEDUPD_PG_DUPLICATES_H
#define DEDUPD_PG_DUPLICATES_H

#include <stddef.h>
#include <stdint.h>

#include "pg/store.h"

/** A sampled absorbed duplicate: its key and where it arrived. */
struct store_dup_row {
        const char *key;
        const char *topic;
        int32_t partition;
        int64_t offset;
        const char *source; /* provenance.header's value; NULL: none */
};

/** What was recorded of one: how it relates to the key's first delivery. */
typedef void (*store_dup_seen_fn)(void *opaque, const char *topic, const char *origin, const char *source,
                                  int64_t delay_ms);

/**
 * One statement (its own transaction): each row recorded in
 * dedupd.duplicates with the key's first delivery (dedupd.keys: its topic,
 * partition, offset and when it was claimed) and its origin — redelivery
 * (that very message again), same-partition (another message of the same
 * partition: the producer sent it twice), other-partition, other-topic.
 * A key with no row (purged meanwhile) is not recorded. seen() is called
 * for each row written.
 */
enum store_rc store_note_duplicates(struct store *s, const char *ns, const struct store_dup_row *rows, size_t n,
                                    store_dup_seen_fn seen, void *opaque, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** What dedupctl dupes reports. */
enum store_dup_report {
        DUP_TOTAL,     /* one row: sampled, first seen_at, last seen_at */
        DUP_BY_ORIGIN, /* origin, sampled, delay p50 ms, p99 ms, max ms */
        DUP_BY_SOURCE, /* source ("(none)"), sampled, redelivery, same-partition, other-partition, other-topic */
        DUP_BY_PLACE,  /* topic, partition, sampled, distinct keys, delay p50 ms */
        DUP_REPORTS
};

/** The sampled duplicates of namespace ns seen at or after since_ms (epoch
 *  ms), of one topic ("": every topic), at most limit rows. */
enum store_rc store_dup_report(struct store *s, const char *ns, int64_t since_ms, const char *topic, int limit,
                               enum store_dup_report what, PGresult **out, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** One check of a topic's keys against its handler's evidence. */
struct store_absorption {
        int64_t keys;       /* sampled DONE and FAILED keys */
        int64_t done;       /* of them DONE */
        int64_t effects;    /* their rows in the evidence table */
        int64_t violations; /* keys verify would report: DONE with none or too many, FAILED with one */
        char examples[512]; /* the first few, "key (DONE, 2 effects), ..." */
};

/**
 * About `sample` random DONE and FAILED keys of topic (TABLESAMPLE SYSTEM,
 * sized from the table's estimated rows: a check reads about that many
 * rows however large dedupd.keys is), each with its effects in
 * table(key_column) — the handler's declared evidence, quoted as
 * identifiers — counted as dedupctl verify counts them (one more effect
 * allowed per audited re-run).
 */
enum store_rc store_absorption_sample(struct store *s, const char *ns, const char *topic, const char *table,
                                      const char *key_column, int sample, struct store_absorption *out, char *err,
                                      size_t errsz) __attribute__((warn_unused_result));

#endif
