/* array: PostgreSQL array literals built element by element, so a whole batch travels as one parameter. */
#ifndef DEDUPD_PG_ARRAY_H
#define DEDUPD_PG_ARRAY_H

#include <stddef.h>
#include <stdint.h>

/** A PostgreSQL array literal built element by element (NULL-able). */
struct store_array {
        char *p;
        size_t len, cap;
        size_t cnt;
};
void store_array_text(struct store_array *a, const char *s); /* s may be NULL */
void store_array_int(struct store_array *a, int64_t v);
const char *store_array_finish(struct store_array *a);
void store_array_free(struct store_array *a);

#endif
