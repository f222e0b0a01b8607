/* plan_layouts: what expiring keys costs in each keys.layout — rows deleted one by one from dedupd.keys, or partitions of dedupd.keys_p dropped whole. */
#ifndef DEDUPD_TOOLS_PLAN_LAYOUTS_H
#define DEDUPD_TOOLS_PLAN_LAYOUTS_H

#include <stdio.h>

#include "base/config.h"

/** A key's bucket label ("@2026-12-01|"), once in the table and once in its
 *  unique index: what a key costs more under keys.layout: partitioned. */
#define PLAN_BUCKET_LABEL_BYTES 24.0

/**
 * Per retention class, one row per layout: the most rows and bytes kept,
 * what expiry does each day, the tables it keeps. heap keeps keep's worth
 * and deletes every expired key; partitioned keeps until a bucket ended the
 * namespace's longest keep + keys.skew ago (so up to a bucket more, and a
 * shorter class as long as the longest) and drops a partition a bucket.
 * Returns 0, or -1 when the rate is too large.
 */
int plan_layouts_print(const struct config *cfg, double rate_per_s, double row_bytes, FILE *out);

#endif
