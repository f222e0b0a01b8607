/* array: PostgreSQL array literals built element by element, so a whole batch travels as one parameter. */
#include "pg/array.h"

#include "base/mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void arr_grow(struct store_array *a, size_t need)
{
        if (a->len + need + 2 <= a->cap)
                return;
        size_t cap = a->cap ? a->cap : 256;
        while (cap < a->len + need + 2)
                cap *= 2;
        char *p = xrealloc(a->p, cap);
        a->p = p;
        a->cap = cap;
}

static void arr_sep(struct store_array *a)
{
        arr_grow(a, 1);
        a->p[a->len++] = a->cnt ? ',' : '{';
        a->cnt++;
}

void store_array_text(struct store_array *a, const char *s)
{
        arr_sep(a);
        if (!s) {
                arr_grow(a, 4);
                memcpy(a->p + a->len, "NULL", 4);
                a->len += 4;
                return;
        }
        arr_grow(a, 2 * strlen(s) + 2);
        a->p[a->len++] = '"';
        for (; *s; s++) {
                if (*s == '"' || *s == '\\')
                        a->p[a->len++] = '\\';
                a->p[a->len++] = *s;
        }
        a->p[a->len++] = '"';
}

void store_array_int(struct store_array *a, int64_t v)
{
        arr_sep(a);
        arr_grow(a, 24);
        a->len += (size_t)snprintf(a->p + a->len, 24, "%" PRId64, v);
}

const char *store_array_finish(struct store_array *a)
{
        arr_grow(a, 2);
        if (!a->cnt)
                a->p[a->len++] = '{';
        a->p[a->len++] = '}';
        a->p[a->len] = '\0';
        return a->p;
}

void store_array_free(struct store_array *a)
{
        free(a->p);
        memset(a, 0, sizeof(*a));
}
