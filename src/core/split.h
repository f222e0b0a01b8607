/* split: the guard against a message that makes a batch fail without being named — the batch is halved until that one message runs alone, where its failures count toward retry.max_attempts. */
#ifndef DEDUPD_CORE_SPLIT_H
#define DEDUPD_CORE_SPLIT_H

#include <stddef.h>

#include "core/mode.h"
#include "core/msg_state.h"

/*
 * A mode returns PL_SPLIT when its batch failed because of one of its
 * messages without knowing which: a value one of dedupd's own statements
 * refused (STORE_DATA: not valid UTF-8, a CHECK or trigger on a dedupd
 * table), or a set-oriented handler that left the transaction aborted or
 * ended it. Then the batch is halved, and halved again while it keeps
 * failing, until the failing message runs alone: from then on each failure
 * is its own attempt, and after retry.max_attempts it is dead-lettered with
 * what failed. What commits on the way is acknowledged; once every message
 * of the failed batch has committed, batches are whole again. In process
 * memory only: a restart starts whole and narrows again.
 */
struct split {
        size_t limit; /* 0: whole batches; else the most messages the next batch takes */
        size_t left;  /* messages of the batch that failed not yet committed */
};

/** How many of the n messages at hand the next batch takes. */
size_t split_take(const struct split *s, size_t n);

/** The result rc of the batch ents[0, n) of topic pt: PL_SPLIT on a batch
 *  of several (narrowed: retry at once), an attempt of the message when it
 *  ran alone (then PL_RETRY: retried with backoff); rc otherwise. */
enum pl_rc split_after(struct split *s, const struct pl_topic *pt, struct pl_entry *const *ents, size_t n,
                       enum pl_rc rc, const char *err);

/** The topic's buffered messages are gone (revoked): whole batches again. */
void split_reset(struct split *s);

#endif
