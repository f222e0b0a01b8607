/* source: the seam between a message broker and the protocol — messages in; acknowledgements, pauses and records out. */
#ifndef DEDUPD_CORE_SOURCE_H
#define DEDUPD_CORE_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "base/record.h"
#include "dedupd/handler.h"

/*
 * The protocol holds no broker type. A source feeds it messages, each with
 * a position — topic, partition, offset: Kafka's own, or for a broker that
 * acknowledges message by message a sequence the source numbers its
 * deliveries with — and is told, after COMMIT, up to where each partition
 * may be acknowledged. A sink publishes what the protocol writes (dead
 * letters, the outbox) and says when the broker has it.
 */

/** One message, as a source hands it over: transport data only. What the
 *  protocol learns of it (its key, fingerprint, why it is dead-lettered,
 *  its failed attempts) the runner keeps beside it (core/msg_state.h). */
struct pl_msg {
        size_t topic_idx; /* the topic's place in the config */
        const char *topic;
        int32_t partition;
        int64_t offset;
        int64_t timestamp_ms;
        const void *key;
        size_t key_len;
        const void *value;
        size_t value_len;
        struct dedupd_header *headers;
        size_t header_cnt;
        struct dedupd_header *props; /* the broker's properties by name ({amqp:NAME}); NULL: none */
        size_t prop_cnt;
        void *source; /* the source's own message, owned by the source */
};

/** A message for the dead-letter topic, and what dedupd says of it in its
 *  dedupd.* headers. */
struct pl_dead_letter {
        const struct pl_msg *msg;
        const char *reason;             /* why (never NULL) */
        const char *idem_key;           /* NULL: no key could be derived */
        const char *fingerprint;        /* the message's; NULL: none */
        const char *stored_fingerprint; /* the first one's, when they differ (a mismatch); else NULL */
};

/** A partition of a configured topic. */
struct pl_part {
        size_t topic_idx;
        int32_t partition;
};

/** Offsets a source proved hold nothing to deliver (a Kafka transaction's
 *  markers, an aborted transaction's records): the partition is done from
 *  `from` — what was acknowledged, or where it started; -1: it had no
 *  position then — up to `to`, and no message was handed over in between. */
struct pl_skip {
        size_t topic_idx;
        int32_t partition;
        int64_t from, to;
};

/** Where a partition may be acknowledged after a committed batch. */
struct pl_commit {
        const char *topic;
        int32_t partition;
        int64_t next_offset; /* everything before it is done */
};

struct source;

/** What a broker's consumer side does for the runner. */
struct source_ops {
        /** Wait at most timeout_ms for one message; NULL when none came.
         *  Assignments and revocations are served meanwhile, through the
         *  source_events the source was made with. */
        struct pl_msg *(*poll)(struct source *src, int timeout_ms);
        /** Give back a message the runner is done with (acknowledged or
         *  dropped). */
        void (*release)(struct source *src, struct pl_msg *m);
        /** After COMMIT: each partition is done up to next_offset. */
        void (*ack)(struct source *src, const struct pl_commit *commits, size_t n);
        /** Optional, right after ack: exactly these messages committed (for a
         *  broker that acknowledges message by message and may deliver below
         *  a committed position again). */
        void (*done)(struct source *src, struct pl_msg *const *msgs, size_t n);
        /** Stop (pause 1) or resume fetching these partitions. */
        void (*pause)(struct source *src, const struct pl_part *parts, size_t n, int pause);
        /** Optional (NULL: the broker cannot rewind): fetch these partitions
         *  from start[i] on — >= 0, or SOURCE_START_BROKER for where the
         *  broker has them — dropping what was fetched and not handed over;
         *  nothing handed over before it is delivered after it. Whether a
         *  partition fetches is left as pause set it. 0, or -1 and why (the
         *  runner tries again). */
        int (*seek)(struct source *src, const struct pl_part *parts, const int64_t *start, size_t n, char *err,
                    size_t errsz);
        /** A fatal broker error, or NULL: the runner stops with it. */
        const char *(*failure)(struct source *src);
        /** Make what was acknowledged visible and leave (the group). */
        void (*close)(struct source *src);
        void (*destroy)(struct source *src);
        /** Optional: up to max partitions with nothing outstanding whose
         *  position moved past offsets that hold nothing to deliver. The
         *  runner records each (from -> to) in the database, then acks it. */
        size_t (*skipped)(struct source *src, struct pl_skip *out, size_t max);
        /** Optional: 1 while the broker is reachable, else 0 and why, in
         *  words for /readyz (never a secret). */
        int (*connected)(struct source *src, char *why, size_t whysz);
};

/** A source implementation begins with this. */
struct source {
        const struct source_ops *ops;
};

/** Where a partition starts, besides an offset (>= 0). */
#define SOURCE_START_BROKER (-1) /* where the broker has it (Kafka: the group's committed offset) */
#define SOURCE_START_LATER (-2)  /* not known yet: the source neither moves nor fetches it until seek */

/** What a source tells the runner, from inside poll. */
struct source_events {
        /** Partitions are now this process's: start[i] is set to where each
         *  starts (>= 0), left SOURCE_START_BROKER for the broker's own
         *  position, or SOURCE_START_LATER when the database cannot say yet
         *  (a source with seek only: the runner seeks it once it can). */
        void (*assigned)(void *opaque, const struct pl_part *parts, size_t n, int64_t *start);
        /** The assignment is in place (the source fetches from those
         *  starts): the runner decides at once, before any message of it is
         *  delivered, which partitions must wait. */
        void (*settled)(void *opaque);
        /** Partitions are gone (all of them when parts is NULL): what is
         *  buffered of them was never acknowledged and is dropped. */
        void (*revoked)(void *opaque, const struct pl_part *parts, size_t n);
        void *opaque;
};

/** What became of one record the relay asked a sink to publish. */
enum sink_fate {
        SINK_ACKED = 0, /* the broker has it */
        SINK_FAILED,    /* the broker refused this record (no such topic, exchange or stream, too large, ...) */
        SINK_UNSENT,    /* not tried, or the broker could not be reached or did not answer: not this record's fault */
};

struct sink_outcome {
        enum sink_fate fate;
        char reason[256]; /* FAILED, UNSENT: why, in words */
};

/** How the protocol publishes. */
struct sink {
        /** The outbox: publish each record and set out[i] to what became of
         *  recs[i], waiting at most about outbox.publish_timeout_ms for the
         *  broker's answers. One record's refusal never stops the others;
         *  a broker that cannot be reached leaves the rest UNSENT. */
        void (*publish)(void *opaque, const struct record *recs, size_t n, struct sink_outcome *out);
        /** Each letter's message unchanged plus dedupd's headers (reason,
         *  origin, key, fingerprints) to the dead-letter topic; 0 only once
         *  the broker has acknowledged every one. */
        int (*dead_letter)(void *opaque, const char *dlq_topic, const char *ns, const struct pl_dead_letter *letters,
                           size_t n, char *err, size_t errsz);
        void *opaque;
        /** Optional: -1 and why when the broker could never take rec (its
         *  destination is no legal name there, its key does not fit how the
         *  broker uses it), else 0. What goes to the outbox is checked first. */
        int (*check)(void *opaque, const struct record *rec, char *why, size_t whysz);
};

#endif
