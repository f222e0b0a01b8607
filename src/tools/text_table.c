/* text_table: aligned text columns (tools/text_table.h). */
#include "tools/text_table.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

void text_table_add(struct text_table *t, const char *const *cells)
{
        if (t->rows == t->cap) {
                t->cap = t->cap ? t->cap * 2 : 8;
                t->cell = xrealloc(t->cell, t->cap * sizeof(*t->cell));
        }
        for (int c = 0; c < t->cols; c++)
                snprintf(t->cell[t->rows][c], TEXT_TABLE_CELL, "%s", cells[c]);
        t->rows++;
}

void text_table_print(const struct text_table *t, FILE *out)
{
        int w[TEXT_TABLE_MAX_COLS] = {0};
        for (size_t r = 0; r < t->rows; r++)
                for (int c = 0; c < t->cols; c++)
                        if ((int)strlen(t->cell[r][c]) > w[c])
                                w[c] = (int)strlen(t->cell[r][c]);
        for (size_t r = 0; r < t->rows; r++) {
                for (int c = 0; c + 1 < t->cols; c++)
                        fprintf(out, "%-*s   ", w[c], t->cell[r][c]);
                fprintf(out, "%s\n", t->cell[r][t->cols - 1]);
        }
}

void text_table_free(struct text_table *t)
{
        free(t->cell);
        t->cell = NULL;
        t->rows = t->cap = 0;
}
