/* msg_state: the protocol's state of each message a source hands over — kept by the runner beside the message, across every attempt of its batch, in a pool that allocates nothing per message. */
#ifndef DEDUPD_CORE_MSG_STATE_H
#define DEDUPD_CORE_MSG_STATE_H

#include <stddef.h>

#include "core/source.h"

/** What the protocol knows of one message; the protocol's to set and to
 *  free, never the source's. */
struct pl_state {
        char *idem_key; /* derived once */
        char *key_text; /* the key's text when idem_key is its hash (stored beside it), else NULL */
        char *tenant;   /* tenant.key's value (a tenant name), or NULL */
        char *prev_key; /* key.previous, while its window lasts: the key the previous template builds, or NULL */
        char fingerprint[65];
        char stored_fingerprint[65]; /* set when a duplicate's fingerprint differs */
        char *dlq_reason;            /* set: the message goes to the dead-letter topic */
        int derived;                 /* the key was derived (or found underivable) */
        int over_quota;              /* dead-lettered: its tenant held tenant.quota live keys */
        int dead_lettered;           /* the dead-letter write was acknowledged */
        int attempts;                /* failed attempts so far (handler RETRY, or what fail_reason says) */
        char *fail_reason;           /* what the last failed attempt was, as a phrase ("handler returned RETRY") */
};

/** A buffered message and the protocol's state of it: what the runner
 *  buffers, hands to its lanes and gives back. */
struct pl_entry {
        struct pl_msg *msg; /* the source's, until given back */
        struct pl_state st;
};

/** Free what st holds and empty it. */
void pl_state_clear(struct pl_state *st);

/** Entries for the messages the runner holds, reused: allocated a slab at a
 *  time and never moved (a lane works on an entry while the runner's
 *  buffers grow). One thread takes and gives (the runner's); it keeps what
 *  the most messages buffered at once needed. */
struct pl_pool {
        struct pl_pool_slab *slabs;
        struct pl_pool_node *free;
};

/** An empty entry holding m. */
struct pl_entry *pl_pool_take(struct pl_pool *p, struct pl_msg *m);
/** e's state freed and e back in the pool; returns the message it held. */
struct pl_msg *pl_pool_give(struct pl_pool *p, struct pl_entry *e);
/** Every slab freed (the entries given back or abandoned). */
void pl_pool_free(struct pl_pool *p);

#endif
