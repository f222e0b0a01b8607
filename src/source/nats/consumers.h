/* consumers: the stream and each topic's durable pull consumer on the server — checked, created at a start sequence, moved back, described. */
#ifndef DEDUPD_SOURCE_NATS_CONSUMERS_H
#define DEDUPD_SOURCE_NATS_CONSUMERS_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "source/nats/link.h"

enum nats_check_rc {
        NATS_CHECK_OK = 0,
        NATS_CHECK_UNREACHABLE, /* no answer: try again */
        NATS_CHECK_FAILED,      /* an answer that will not change (the stream is missing) */
};

/**
 * nats.stream exists, and every topic's retention class keeps keys at least
 * as long as the stream keeps messages (its max_age; 0 keeps them for ever)
 * unless allow_shorter_than_topic: NATS_CHECK_FAILED with the first class
 * too short. Its last sequence in *last_seq (may be NULL). Run at start-up
 * and by dedupctl check.
 */
enum nats_check_rc nats_stream_check(struct nats_link *l, const struct config *cfg, uint64_t *last_seq, char *err,
                                     size_t errsz);

/** nats.stream exists (its retention not compared): for a reconnection,
 *  where a stream changed meanwhile must not stop consuming. */
enum nats_check_rc nats_stream_lookup(struct nats_link *l, const struct config *cfg, uint64_t *last_seq, char *err,
                                      size_t errsz);

/** How long the stream keeps messages, in milliseconds: its max_age
 *  (rounded up), or -1 for ever (max_age 0). */
int64_t nats_stream_retention_ms(const jsStreamInfo *si);

/**
 * Topic t's consumer, so that it delivers everything not yet acknowledged.
 * New, it starts at start (the database's position, a stream sequence >= 1)
 * or, with start -1, at the stream's first message. Existing, it starts
 * after its acknowledged floor, or at start where that is lower (the
 * database was moved back); it is deleted and created again there when it
 * stands elsewhere or holds deliveries (a predecessor died with them).
 * Never past a message that was not acknowledged: a delivery lost on its
 * way can sit below the database's position. Re-delivered messages are
 * absorbed by the dedup table.
 */
enum nats_check_rc nats_consumer_ensure(struct nats_link *l, const struct config *cfg, size_t t, int64_t start,
                                        char *err, size_t errsz);

/** Delete topic t's consumer and create it at a start sequence (>= 1; -1:
 *  the stream's first message). Its first stream sequence in *first. */
enum nats_check_rc nats_consumer_reset(struct nats_link *l, const struct config *cfg, size_t t, int64_t start,
                                       int64_t *first, char *err, size_t errsz);

/** The stream sequence of the first message at or after ms (epoch
 *  milliseconds; past the last message: the next sequence). */
enum nats_check_rc nats_seq_at_time(struct nats_link *l, const struct config *cfg, int64_t ms, int64_t *seq, char *err,
                                    size_t errsz);

/** What the server says of topic t's consumer; found is 0 when it does not exist. */
struct nats_consumer_state {
        int found;
        uint64_t ack_floor;  /* stream sequence acknowledged, all below too */
        uint64_t delivered;  /* stream sequence last delivered */
        uint64_t pending;    /* messages not yet delivered */
        int64_t ack_pending; /* delivered, not acknowledged */
        int64_t waiting;     /* pull requests waiting: a consumer is pulling */
};
enum nats_check_rc nats_consumer_state(struct nats_link *l, const struct config *cfg, size_t t,
                                       struct nats_consumer_state *st, char *err, size_t errsz);

#endif
