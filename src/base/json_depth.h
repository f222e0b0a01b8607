/* json_depth: how deep a payload's JSON nests, counted on its bytes before any parser sees them (limits.json_depth). */
#ifndef DEDUPD_BASE_JSON_DEPTH_H
#define DEDUPD_BASE_JSON_DEPTH_H

#include <stddef.h>

/** How deep the JSON in value nests, if deeper than limit (brackets outside
 *  strings; a parser's stack never grows past what this counts): limit + 1,
 *  or 0 when within it. Not a validator: any bytes are counted. */
size_t json_depth_over(const void *value, size_t len, size_t limit);

#endif
