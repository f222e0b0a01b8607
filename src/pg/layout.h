/* layout: which table holds this process's keys — dedupd.keys (one table) or dedupd.keys_p (partitioned by bucket, keys.layout: partitioned) — and every statement written for dedupd.keys said of the table in use. */
#ifndef DEDUPD_PG_LAYOUT_H
#define DEDUPD_PG_LAYOUT_H

/*
 * Every statement in pg/ names dedupd.keys. With keys.layout: partitioned
 * the keys are in dedupd.keys_p instead, a table of the same columns whose
 * key collation is the partitions' ("C"), so each statement runs there as
 * written: the store says it of dedupd.keys_p, here, once per statement
 * text. One layout per process: it is the namespace's (dedupctl check
 * refuses a namespace whose keys are in the other table), set from the
 * config before the first statement.
 */
enum keys_layout {
        KEYS_HEAP,        /* dedupd.keys */
        KEYS_PARTITIONED, /* dedupd.keys_p */
};

void keys_layout_set(enum keys_layout layout);
struct config;
/** keys.layout's: what dedupd and dedupctl set once the config is read. */
void keys_layout_from_config(const struct config *cfg);
enum keys_layout keys_layout_get(void);
/** "dedupd.keys" or "dedupd.keys_p": the table in use, for messages. */
const char *keys_layout_table(void);

/** sql as the store runs it: itself under KEYS_HEAP or when it names no
 *  dedupd.keys, else the same text naming dedupd.keys_p (kept for the
 *  process's life, one per distinct text). */
const char *keys_layout_sql(const char *sql);

/** The text of sql naming dedupd.keys_p where it names dedupd.keys (a
 *  whole name: dedupd.keys_p and dedupd.keys_x are left alone); malloc'd. */
char *keys_layout_rewrite(const char *sql);

#endif
