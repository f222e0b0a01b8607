/* steps: the steps both modes take the same way — derive a key, dead-letter, judge a fingerprint mismatch, book a commit. */
#ifndef DEDUPD_CORE_STEPS_H
#define DEDUPD_CORE_STEPS_H

#include <stddef.h>

#include "core/mode.h"
#include "core/msg_state.h"
#include "pg/offsets.h"

/** Derive key and fingerprint once per message (kept across attempts), and
 *  set dlq_reason for what cannot be processed (oversized, no key, retry
 *  budget spent). A reason set before (the crash-loop guard's) is kept, and
 *  the key is still derived so the dead letter names it. */
void step_prepare(const struct pl_topic *pt, struct pl_entry *e);

/** A failed attempt of a message (st its state), and what it was (a
 *  phrase: "handler returned RETRY"): once retry.max_attempts are spent,
 *  step_prepare dead-letters the message with it. */
void step_attempt(struct pl_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Write ents' messages (each with its dlq_reason) to the topic's
 *  dead-letter topic; only once the broker acknowledged every one are they
 *  marked dead_lettered (and logged). -1: nothing may be acknowledged. */
int step_dead_letter(struct pl_topic *pt, struct pl_entry *const *ents, size_t n, char *err, size_t errsz)
        __attribute__((warn_unused_result));

enum mismatch_verdict {
        MISMATCH_NONE,   /* same payload (or nothing to compare with) */
        MISMATCH_KEEP,   /* another payload: counted, logged, absorbed */
        MISMATCH_LETTER, /* another payload, dead-lettered (fingerprint.on_mismatch): dlq_reason set */
};
/** Same key, another fingerprint than the first one's: a key-design bug or
 *  a client bug, judged by fingerprint.on_mismatch. */
enum mismatch_verdict step_mismatch(struct pl_topic *pt, struct pl_entry *e, const char *first_fingerprint);
/** Record a mismatch v (not MISMATCH_NONE) in dedupd.mismatches, in the
 *  current transaction, for dedupctl verify and stats. */
enum store_rc step_note_mismatch(struct pl_topic *pt, const struct pl_entry *e, const char *first_fingerprint,
                                 enum mismatch_verdict v, char *err, size_t errsz) __attribute__((warn_unused_result));

/** After a COMMIT of prog: its outcomes added to the stats and metrics. */
void step_counted(struct pl_topic *pt, const struct store_progress *prog, size_t nprog);

/** After a COMMIT of prog: fill commits[], add to the stats, remember each
 *  partition's verified position and forget its crash-loop ledger rows.
 *  Returns nprog. */
size_t step_committed(struct pl_topic *pt, const struct store_progress *prog, size_t nprog, struct pl_commit *commits);

/** Write prog (each partition's own_next filled from what this process
 *  committed): PL_OK; PL_RETRY with the statement's failure in *rc; or
 *  PL_REPOSITION, nothing written, when the database is behind this
 *  process's own commits (err says where). */
enum pl_rc step_progress(struct pl_topic *pt, struct store_progress *prog, size_t nprog, enum store_rc *rc, char *err,
                         size_t errsz) __attribute__((warn_unused_result));

/** A failed statement: roll back, and what the batch then is (PL_SPLIT
 *  when the statement refused a value: STORE_DATA). */
enum pl_rc step_fail(struct store *s, enum store_rc rc);

#endif
