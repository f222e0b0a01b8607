/* bucket_time: the time a key belongs to, read from a message's text (a date, an ISO 8601 time, Unix seconds or milliseconds), as a day number and a bucket label "@YYYY-MM-DD|". */
#ifndef DEDUPD_BASE_BUCKET_TIME_H
#define DEDUPD_BASE_BUCKET_TIME_H

#include <stddef.h>
#include <stdint.h>

#define BUCKET_DAY_MS 86400000LL
/** "@YYYY-MM-DD|" and its NUL. */
#define BUCKET_LABEL_SIZE 13

/** Milliseconds since 1970 of v: "2026-12-01" (midnight UTC; the start of a
 *  longer ISO 8601 time: its date as written, whatever its zone, so every
 *  copy of a message agrees), or Unix seconds (up to 11 digits) or
 *  milliseconds (12 to 15). 0, or -1 with the reason in why. */
int bucket_time_parse(const char *v, int64_t *ms, char *why, size_t whysz);

/** The day number (days since 1970-01-01) of ms, rounded down. */
int64_t bucket_day_of(int64_t ms);

/** The first day of the bucket of width days day is in. */
int64_t bucket_start(int64_t day, int64_t width);

/** "@YYYY-MM-DD|" of day into buf (BUCKET_LABEL_SIZE bytes). */
void bucket_label(int64_t day, char *buf);

/** "YYYY-MM-DD" of day into buf (11 bytes). */
void bucket_date(int64_t day, char *buf);

#endif
