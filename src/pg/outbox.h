/* outbox: the relay's statements on dedupd.outbox — a message written in the effect's transaction, taken, and settled row by row as the broker answered. */
#ifndef DEDUPD_PG_OUTBOX_H
#define DEDUPD_PG_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include "base/msgid.h"
#include "base/record.h"
#include "pg/store.h"

/** One message to write to the outbox. */
struct outbox_msg {
        const char *idem_key;     /* the key whose effect emitted it, may be NULL */
        struct msgid_place place; /* which of the key's outputs it is: its msg_id */
        struct record rec;
};

/** Write m inside the caller's transaction: it exists if and only if that
 *  transaction commits. Its msg_id is derived from ns, m->idem_key and
 *  m->place (base/msgid.h); a row without a key gets none and goes out with
 *  its sequence id, as rows did before schema migration 10. */
enum store_rc store_outbox_insert(struct store *s, const char *ns, const struct outbox_msg *m, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** An unsent row, decoded; its storage is owned by the row. */
struct outbox_row {
        int64_t id;                 /* the sequence: dedupctl outbox and the logs name rows by it */
        char msg_id[MSGID_MAX + 1]; /* the identity it goes out with (dedupd.outbox.id) */
        struct outbox_msg msg;
        unsigned char *key_buf, *value_buf;
        char *topic_buf, *idem_key_buf;
        struct dedupd_header *header_buf;
        unsigned char **header_values;
};

/**
 * Take up to limit rows of ns to publish, oldest first: unsent, not given
 * up, and past their retry_at (a failed row waits there; the rows behind it
 * are taken meanwhile). Locked FOR UPDATE SKIP LOCKED (several relays share
 * the work) inside the caller's transaction. *rows is allocated (free with
 * store_outbox_rows_free).
 */
enum store_rc store_outbox_take(struct store *s, const char *ns, int limit, struct outbox_row **rows, size_t *n,
                                char *err, size_t errsz) __attribute__((warn_unused_result));

/** The broker's answer for one taken row. */
struct outbox_answer {
        int64_t id;
        const char *error; /* NULL: acknowledged; else why it failed (valid UTF-8) */
};

/** When a failed row is tried again, and when it is given up. */
struct outbox_retry {
        int backoff_ms; /* after its first failure; doubles with each */
        int backoff_max_ms;
        int max_failures; /* this many: given up */
};

/** A row whose publish failed, as the statement left it. */
struct outbox_failure {
        int64_t id;
        int failures; /* counted so far, this one included */
        int given_up; /* this failure gave it up */
};

/**
 * Settle the taken rows in one statement, inside the caller's transaction:
 * each acknowledged row marked sent; each failed one counted, its reason
 * kept in last_error, retried after rp's backoff, and given up (given_up_at)
 * at rp->max_failures. Rows not answered stay as they were. *failed gets one
 * entry per failed row (free it).
 */
enum store_rc store_outbox_settle(struct store *s, const struct outbox_answer *answers, size_t n,
                                  const struct outbox_retry *rp, struct outbox_failure **failed, size_t *nfailed,
                                  char *err, size_t errsz) __attribute__((warn_unused_result));

void store_outbox_rows_free(struct outbox_row *rows, size_t n);

#endif
