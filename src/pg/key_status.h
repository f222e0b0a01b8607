/* key_status: where a key's row in dedupd.keys stands, as an enum — the store maps it to and from the text the column holds. */
#ifndef DEDUPD_PG_KEY_STATUS_H
#define DEDUPD_PG_KEY_STATUS_H

/** A key's status (dedupd.keys.status). */
enum key_status {
        KEY_PENDING = 0, /* external mode: claimed, its effect not finished (or its owner gone) */
        KEY_DONE,        /* the handler said OK */
        KEY_FAILED,      /* the handler said REJECT */
        KEY_EXPIRED,     /* external mode: a PENDING key whose lease ran out long ago (reaped) */
};

/** The status as stored and as a duplicate's reply header carries it ("DONE"). */
const char *key_status_name(enum key_status status);

/** The status a stored text names. The column's CHECK admits only the four;
 *  anything else reads as KEY_PENDING, the one that runs no effect by itself. */
enum key_status key_status_parse(const char *text);

#endif
