/* offsets: each partition's position and counters in dedupd.offsets and dedupd.progress_log. */
#ifndef DEDUPD_PG_OFFSETS_H
#define DEDUPD_PG_OFFSETS_H

#include <stddef.h>
#include <stdint.h>

#include "pg/store.h"

/** One partition's progress in a batch. */
struct store_progress {
        const char *topic;
        int32_t partition;
        int64_t from_offset; /* first offset of the partition in the batch */
        int64_t next_offset;
        int64_t consumed, applied, rejected, duplicates, dead_lettered, mismatches;
        int64_t own_next; /* the highest next offset this process committed for it since it was positioned; -1: none */
};

/** Partitions whose stored position is below this process's own (struct
 *  store_progress's own_next): how many, and the first of them. */
struct store_behind {
        size_t count;
        int32_t partition;
        int64_t stored; /* -1: no row */
        int64_t own;
};

/** Upsert next offsets (never backwards) and add the counters — unless a
 *  partition's stored position is below its own_next (the database lost
 *  commits): then nothing is written and *behind says which (count > 0). */
enum store_rc store_progress(struct store *s, const char *ns, size_t n, const struct store_progress *p,
                             struct store_behind *behind, char *err, size_t errsz) __attribute__((warn_unused_result));

/** A partition's next offset in dedupd.offsets. */
struct store_position {
        int32_t partition;
        int64_t next_offset;
};

/** Every partition of topic that has a position (*out allocated; none, and
 *  STORE_OK, in a database dedupd never migrated). The one query. */
enum store_rc store_positions(struct store *s, const char *ns, const char *topic, struct store_position **out,
                              size_t *n, char *err, size_t errsz) __attribute__((warn_unused_result));

/** Set next offsets of the given partitions as they are, backwards too
 *  (dedupctl replay), inside the caller's transaction. */
enum store_rc store_offsets_set(struct store *s, const char *ns, const char *topic, size_t n, const int32_t *parts,
                                const int64_t *next, char *err, size_t errsz) __attribute__((warn_unused_result));

/** next_offset per partition of a topic: out[i] = -1 where no row exists. */
enum store_rc store_offsets_get(struct store *s, const char *ns, const char *topic, size_t n, const int32_t *parts,
                                int64_t *out, char *err, size_t errsz) __attribute__((warn_unused_result));

/** Move partitions over offsets that hold no message (a transaction's
 *  markers, an aborted transaction's records), in a statement of its own:
 *  parts[i] from exactly from[i] (-1: only where it has no row yet) to
 *  to[i]. moved[i] is 1 where it moved; a row anywhere else stays. */
enum store_rc store_offsets_skip(struct store *s, const char *ns, const char *topic, size_t n, const int32_t *parts,
                                 const int64_t *from, const int64_t *to, int *moved, char *err, size_t errsz)
        __attribute__((warn_unused_result));

#endif
