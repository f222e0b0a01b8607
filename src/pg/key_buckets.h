/* key_buckets: dedupd.keys_p's partitions, one per namespace and bucket — made ahead, listed, dropped whole — and which layout holds a namespace's keys. */
#ifndef DEDUPD_PG_KEY_BUCKETS_H
#define DEDUPD_PG_KEY_BUCKETS_H

#include <stddef.h>
#include <stdint.h>

#include "pg/store.h"

/*
 * A bucket is a day number (days since 1970-01-01) and a width in days; its
 * keys begin "@YYYY-MM-DD|" (base/bucket_time.h). Partitions are made and
 * dropped by dedupd.key_partition_create and _drop (migration 18), which
 * run as the schema's owner and record each partition in
 * dedupd.key_partitions; a dropped bucket is never made again.
 */

/** No bucket: a day before any. */
#define KEY_BUCKET_NONE INT64_MIN

/** Make the partitions of buckets from, from + width, ... through to (day
 *  numbers; from aligned to width) that were never made; *created: how many. */
enum store_rc store_key_buckets_ensure(struct store *s, const char *ns, int64_t from, int64_t to, int64_t width,
                                       int *created, char *err, size_t errsz) __attribute__((warn_unused_result));

/** The end (day number) of the latest dropped bucket of ns, or KEY_BUCKET_NONE. */
enum store_rc store_key_buckets_dropped_until(struct store *s, const char *ns, int64_t *until, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** The live buckets of ns that end by before (day number), oldest first, at
 *  most max, into days; *n how many. */
enum store_rc store_key_buckets_ended(struct store *s, const char *ns, int64_t before, int64_t *days, size_t max,
                                      size_t *n, char *err, size_t errsz) __attribute__((warn_unused_result));

/** Drop the partition of bucket day: its keys counted into *rows (-1: it
 *  was not live). A statement of its own, outside any transaction. */
enum store_rc store_key_buckets_drop(struct store *s, const char *ns, int64_t day, int64_t *rows, char *err,
                                     size_t errsz) __attribute__((warn_unused_result));

/** What ns keeps by bucket: live partitions, the oldest and newest live
 *  bucket (KEY_BUCKET_NONE when none), their bytes, dropped partitions and
 *  the keys they held. */
struct key_buckets_summary {
        int64_t live, oldest, newest, bytes, dropped, dropped_rows;
};
enum store_rc store_key_buckets_summary(struct store *s, const char *ns, struct key_buckets_summary *sum, char *err,
                                        size_t errsz) __attribute__((warn_unused_result));

/** Whether the table of the layout ns is not in (dedupd.keys for
 *  partitioned, dedupd.keys_p for heap) holds keys of ns: *found 1. */
enum store_rc store_keys_in_other_layout(struct store *s, const char *ns, int partitioned, int *found, char *err,
                                         size_t errsz) __attribute__((warn_unused_result));

#endif
