/* plan: what dedupd.keys will hold — rows and bytes per retention class at a rate of new keys. */
#ifndef DEDUPD_TOOLS_PLAN_H
#define DEDUPD_TOOLS_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/config.h"

struct store;

/* ---- capacity plan --------------------------------------------------------- */

/** The seed's estimate of a row: key + status + times. */
#define PLAN_DEFAULT_ROW_BYTES 100.0

/** rows = rate x keep, bytes = rows x row size (both rounded). Returns 0, or
 *  -1 when an input is negative or the result overflows. */
int plan_class(double rate_per_s, int64_t keep_ms, double row_bytes, uint64_t *rows, uint64_t *bytes);

/** "10000/s", "600000/min", "36000000/h" or "10000" (per second). Returns 0,
 *  or -1 with a message. */
int plan_parse_rate(const char *s, double *per_s, char *err, size_t errsz);

/** 1728000000 -> "1.73 billion"; 999 -> "999". */
const char *plan_human_count(uint64_t n, char *buf, size_t bufsz);
/** 172800000000 -> "173 GB" (decimal units, three significant digits). */
const char *plan_human_bytes(uint64_t n, char *buf, size_t bufsz);

/**
 * Print the plan of every retention class (and topics without one: kept
 * forever) at rate_per_s. The row size is measured from dedupd.keys when s
 * is connected and the table has rows, otherwise PLAN_DEFAULT_ROW_BYTES;
 * the output says which. Returns 0, or -1 with a message.
 */
int plan_print(const struct config *cfg, struct store *s, double rate_per_s, FILE *out, char *err, size_t errsz);

#endif
