/* text_table: a plain table of text cells, printed with each column as wide as its widest cell (dedupctl plan's). */
#ifndef DEDUPD_TOOLS_TEXT_TABLE_H
#define DEDUPD_TOOLS_TEXT_TABLE_H

#include <stddef.h>
#include <stdio.h>

#define TEXT_TABLE_MAX_COLS 8
#define TEXT_TABLE_CELL 96

struct text_table {
        int cols;
        char (*cell)[TEXT_TABLE_MAX_COLS][TEXT_TABLE_CELL];
        size_t rows, cap;
};

/** A row of t->cols cells (each cut at TEXT_TABLE_CELL - 1 bytes). */
void text_table_add(struct text_table *t, const char *const *cells);

/** The rows, columns three spaces apart, the last one unpadded. */
void text_table_print(const struct text_table *t, FILE *out);

void text_table_free(struct text_table *t);

#endif
