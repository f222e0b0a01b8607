/* loopback: an in-memory broker for tests — the test queues messages and rebalances, the runner consumes, and every acknowledgement, pause, seek, release and publish is recorded for the test to assert on. */
#ifndef DEDUPD_SOURCE_LOOPBACK_H
#define DEDUPD_SOURCE_LOOPBACK_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "core/source.h"

/*
 * Test-only: compiled into the tests, never into dedupd or dedupctl.
 *
 * One struct loopback is the broker: its partitions' logs (offsets from 0,
 * numbered as they are pushed), what the consumer side was told, and the
 * producer side (a struct sink). The consumer side behaves as a Kafka
 * consumer would: an assignment starts each partition where the runner says
 * (the broker's committed offset, else the first, for SOURCE_START_BROKER);
 * a revocation moves it back to the committed offset for its next owner; a
 * paused or awaiting partition hands nothing over. Assignments and
 * revocations the test asks for are served from inside poll, in order, as a
 * real source serves a rebalance. Single-threaded but for the sink (its
 * records are locked: lanes may publish from their threads).
 */

struct loopback;

/** LOOPBACK_NONE: a position that was never set (no ack, no seek). */
#define LOOPBACK_NONE INT64_MIN

/** What the runner did to one partition, as the broker saw it. */
struct loopback_part_state {
        int assigned;     /* this consumer owns it */
        int paused;       /* as the runner last said */
        int awaiting;     /* started SOURCE_START_LATER, not sought since */
        int64_t acked;    /* the committed next offset (ack): LOOPBACK_NONE when never acked */
        int64_t started;  /* the start the runner gave at the last assignment (an offset or SOURCE_START_*) */
        int64_t sought;   /* the last seek's start (an offset or SOURCE_START_BROKER); LOOPBACK_NONE: none */
        int64_t position; /* the next offset it would hand over */
        unsigned pauses, resumes, seeks, acks;
        unsigned acks_backwards; /* acks below what was acked before (never right) */
        size_t handed;           /* messages handed over (poll) */
        size_t released;         /* given back (release) */
        size_t done;             /* reported committed one by one (done) */
        size_t outstanding;      /* handed over and not given back */
};

/** A dead letter as the sink received it. */
struct loopback_dead {
        char *dlq_topic;
        char *topic; /* where the message came from */
        int32_t partition;
        int64_t offset;
        char *idem_key; /* NULL: no key could be derived */
        char *reason;   /* dedupd's reason header */
        char *value;
};

/** An outbox record the sink was asked to publish, with what the sink answered. */
struct loopback_pub {
        char *topic;
        char *key;
        char *value;
        enum sink_fate fate;
};

/** A broker for cfg's topics (cfg outlives it); nothing queued, nothing assigned. */
struct loopback *loopback_new(const struct config *cfg);
/** Free the broker, its records, and its consumer side (which must not be used after). */
void loopback_free(struct loopback *lb);

/** The broker's consumer side, telling the runner through ev. Its destroy
 *  leaves the broker (free that with loopback_free). */
struct source *loopback_source(struct loopback *lb, struct source_events ev);
/** A broker and its consumer side at once, owned by the source: its destroy
 *  frees the broker (how a broker table makes sources). */
struct source *loopback_source_new(const struct config *cfg, struct source_events ev);
/** The broker behind a source loopback_source or loopback_source_new made. */
struct loopback *loopback_of(struct source *src);
/** The broker's producer side: dead letters and the outbox, recorded. */
struct sink loopback_sink(struct loopback *lb);

/* ---- what the test does ---------------------------------------------------- */

/** Append a message to topic/partition's log (headers copied; NULL key: none).
 *  Returns its offset. The topic must be one of the config's. */
int64_t loopback_push(struct loopback *lb, const char *topic, int32_t partition, const char *key, const char *value,
                      const struct dedupd_header *headers, size_t header_cnt);
/** n offsets that hold nothing to deliver (a transaction's markers): skipped
 *  over by the consumer, then reported through skipped() once nothing of the
 *  partition is outstanding. */
void loopback_gap(struct loopback *lb, const char *topic, int32_t partition, int64_t n);
/** Assign these partitions of topic at the next poll (one rebalance). */
void loopback_assign(struct loopback *lb, const char *topic, const int32_t *partitions, size_t n);
/** Revoke these partitions of topic at the next poll. */
void loopback_revoke(struct loopback *lb, const char *topic, const int32_t *partitions, size_t n);
/** Revoke everything at the next poll (the runner is told parts NULL). */
void loopback_revoke_all(struct loopback *lb);
/** fn(lb, opaque) at the start of every poll, before the rebalances asked
 *  for are served: where a test steps its scenario and sets its stop flag. */
void loopback_on_poll(struct loopback *lb, void (*fn)(struct loopback *lb, void *opaque), void *opaque);
/** A fatal broker error the runner stops with (NULL: none). */
void loopback_set_failure(struct loopback *lb, const char *failure);
/** What connected() answers (why: when down). */
void loopback_set_connected(struct loopback *lb, int up, const char *why);
/** Dead letters refused with why (NULL: taken again). */
void loopback_refuse_dead_letters(struct loopback *lb, const char *why);
/** What publish answers for every outbox record from now on (SINK_ACKED by default). */
void loopback_publish_fate(struct loopback *lb, enum sink_fate fate, const char *why);

/* ---- what the test asserts on ------------------------------------------------ */

/** The state of topic/partition (all zero and LOOPBACK_NONE when the broker never saw it). */
struct loopback_part_state loopback_part(const struct loopback *lb, const char *topic, int32_t partition);
/** The committed next offset of topic/partition; LOOPBACK_NONE when never acknowledged. */
int64_t loopback_acked(const struct loopback *lb, const char *topic, int32_t partition);
/** How many polls the runner made. */
unsigned loopback_polls(const struct loopback *lb);
/** Whether the runner closed the consumer. */
int loopback_closed(const struct loopback *lb);
/** The dead letters so far, in the order received: their count, *out the
 *  array (valid until the next sink call). */
size_t loopback_dead_letters(struct loopback *lb, const struct loopback_dead **out);
/** The outbox records publish was asked for, in order (as above). */
size_t loopback_published(struct loopback *lb, const struct loopback_pub **out);

#endif
