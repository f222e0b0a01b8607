/* outbox: the statements on dedupd.outbox — a message written in the effect's transaction, taken and marked sent by the relay. */
#ifndef DEDUPD_PG_OUTBOX_H
#define DEDUPD_PG_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include "base/record.h"
#include "pg/store.h"

/** One message to write to the outbox. */
struct outbox_msg {
        const char *idem_key; /* the key whose effect emitted it, may be NULL */
        struct record rec;
};

/** Write m inside the caller's transaction: it exists if and only if that
 *  transaction commits. */
enum store_rc store_outbox_insert(struct store *s, const char *ns, const struct outbox_msg *m, char *err,
                                  size_t errsz) __attribute__((warn_unused_result));

/** An unsent row, decoded; its storage is owned by the row. */
struct outbox_row {
        int64_t id;
        char id_text[24];
        struct outbox_msg msg;
        unsigned char *key_buf, *value_buf;
        char *topic_buf, *idem_key_buf;
        struct dedupd_header *header_buf;
        unsigned char **header_values;
};

/**
 * Take up to limit unsent rows of ns, oldest first, locking them (FOR UPDATE
 * SKIP LOCKED: several relays share the work), inside the caller's
 * transaction. *rows is allocated (free with store_outbox_rows_free).
 */
enum store_rc store_outbox_take(struct store *s, const char *ns, int limit, struct outbox_row **rows,
                                size_t *n, char *err, size_t errsz) __attribute__((warn_unused_result));

/** Mark the taken rows sent, inside the same transaction. */
enum store_rc store_outbox_sent(struct store *s, const struct outbox_row *rows, size_t n, char *err,
                                size_t errsz) __attribute__((warn_unused_result));

void store_outbox_rows_free(struct outbox_row *rows, size_t n);

#endif
