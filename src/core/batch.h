/* batch: one batch of one topic as the protocol sees it — each message an item with a named state, and the pure steps on them. */
#ifndef DEDUPD_CORE_BATCH_H
#define DEDUPD_CORE_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "core/host.h"
#include "core/msg_state.h"
#include "core/source.h"
#include "pg/key_status.h"
#include "pg/offsets.h"

/* What has become of an item so far (PgBouncer's named states are the model). */
enum item_state {
        ITEM_NEW = 0,     /* keyed, not claimed yet */
        ITEM_DEAD_LETTER, /* goes to the dead-letter topic (e->st.dlq_reason says why) */
        ITEM_FRESH,       /* its key was claimed by this batch: the handler runs */
        ITEM_REPEAT,      /* its key belongs to an earlier item of this batch: a duplicate of it */
        ITEM_KNOWN,       /* its key was there before this batch: a duplicate with a stored outcome */
        ITEM_APPLIED,     /* the handler said OK */
        ITEM_REJECTED,    /* the handler said REJECT */
        ITEM_SKIPPED,     /* external mode: an EXPIRED key acknowledged without running (on_expired: skip) */
        ITEM_LOST,        /* external mode: it ran, but another owner had taken the key */
};

/** A known key's first outcome, as stored. */
struct first_outcome {
        enum key_status status;
        char *response, *fingerprint;
};

struct batch_item {
        struct pl_entry *e; /* the message, and the protocol's state of it (kept across attempts) */
        enum item_state state;
        size_t first;                /* the item of this key's first occurrence in the batch (itself if first) */
        int mismatch;                /* a duplicate whose payload differs from the first one's */
        int known;                   /* the key's first item: the key was there before this batch */
        struct first_outcome stored; /* ITEM_KNOWN, on the key's first item */
        struct dedupd_ctx ctx;       /* ITEM_FRESH: the handler's context */
        const char *row;             /* ITEM_FRESH: where the claim put the key's row (the store's handle) */
        const char *reply_refused;   /* its reply was refused: "invalid" or "not_allowed" (counted on commit) */
};

struct batch {
        const struct topic_conf *t;
        struct batch_item *items;
        size_t n;
        size_t *keys; /* the first item of each distinct key, in key order (claim order) */
        size_t nkeys;
        size_t *fresh; /* fresh items in batch order (the handler's order) */
        size_t nfresh;
        struct store_progress *prog; /* one per partition, once counted */
        size_t nprog;
};

/** Items for ents (in poll order: each partition's in offset order); one free for all. */
void batch_init(struct batch *b, const struct topic_conf *t, struct pl_entry *const *ents, size_t n);
void batch_free(struct batch *b);

/** Items with a dlq_reason are ITEM_DEAD_LETTER, the others
 *  ITEM_NEW; returns how many must still be written (not dead_lettered yet). */
size_t batch_mark_dead_letters(struct batch *b);

/**
 * The distinct keys of the ITEM_NEW items in bytewise order (the order
 * claims lock in, so two claimers never deadlock), in b->keys; a key
 * repeated inside the batch counts once: its later items become
 * ITEM_REPEAT of the first.
 */
void batch_dedupe(struct batch *b);

/** Before batch_dedupe: an item whose previous key (key.previous's, or under
 *  keys.layout: partitioned the bucket before's) is another new item's key
 *  is that message again, in this batch: it takes that key (and its text),
 *  so batch_dedupe makes the two one key — the first in batch order runs,
 *  the other repeats it. Returns how many items took another's key. */
size_t batch_adopt_previous(struct batch *b);

/** Before the claim: item i's message was seen before under another key
 *  (the one key.previous builds): ITEM_KNOWN with that key's stored outcome. */
void batch_known_as(struct batch *b, size_t i, enum key_status status, const char *response, const char *fingerprint);

/** The keys batch_known_as answered leave b->keys: the claim does not insert them. */
void batch_drop_known(struct batch *b);

/** After the claim: claimed[k] says whether b->keys[k] was inserted by this
 *  batch. Those items become ITEM_FRESH (listed in b->fresh, batch order),
 *  the others ITEM_KNOWN. */
void batch_claimed(struct batch *b, const int *claimed);

/** The key's first item of a duplicate (ITEM_REPEAT or ITEM_KNOWN). */
const struct batch_item *batch_first(const struct batch *b, const struct batch_item *it);

/** The fingerprint a duplicate is compared with: the first item's (a repeat
 *  of a fresh key), or the stored one. NULL or "" when unknown. */
const char *batch_first_fingerprint(const struct batch *b, const struct batch_item *it);

/** The outcome a duplicate is served (its key's status, response or NULL). */
void batch_first_outcome(const struct batch *b, const struct batch_item *it, enum key_status *status,
                         const char **response);

/** KEY_DONE or KEY_FAILED for an applied or rejected item; its response,
 *  "rejected" when a rejection set none. */
enum key_status batch_status(const struct batch_item *it);
const char *batch_response(const struct batch_item *it);

/** What a handler result means for an item. */
enum handler_verdict {
        VERDICT_APPLIED,
        VERDICT_REJECTED,
        VERDICT_RETRY, /* RETRY, an unknown result, or OK on an aborted transaction */
};
/** result r of one message; aborted: the transaction is in error; savepoints:
 *  a savepoint can undo what a REJECT wrote. */
enum handler_verdict batch_verdict(dedupd_result_t r, int aborted, int savepoints);

/** Count item states into per-partition progress (b->prog): next offset,
 *  first offset, consumed and each outcome's counter. */
void batch_count(struct batch *b);

/** The same for one message, into p[0..*np) (room for one more). */
void progress_count(struct store_progress *p, size_t *np, const struct pl_msg *m, enum item_state state, int mismatch);

#endif
