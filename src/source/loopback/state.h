/* state: the loopback broker's state — partitions and their logs, the rebalances asked for, the sink's records — shared by its consumer and producer sides. */
#ifndef DEDUPD_SOURCE_LOOPBACK_STATE_H
#define DEDUPD_SOURCE_LOOPBACK_STATE_H

#include <pthread.h>

#include "source/loopback/loopback.h"

/* One message in a partition's log. Entries never move (the log holds
 * pointers): a handed-over message points into its entry. */
struct lb_entry {
        int64_t offset;
        int64_t timestamp_ms;
        char *key; /* NULL: none */
        char *value;
        struct dedupd_header *headers;
        size_t header_cnt;
};

struct lb_part {
        size_t topic_idx;
        int32_t partition;
        struct lb_entry **log; /* by offset, ascending */
        size_t cnt, cap;
        int64_t end; /* the next offset a push or a gap takes */
        struct loopback_part_state st;
};

enum lb_event_kind { LB_ASSIGN, LB_REVOKE };

/* A rebalance asked for, served at the next poll. parts NULL: revoke all. */
struct lb_event {
        enum lb_event_kind kind;
        struct pl_part *parts;
        size_t n;
};

/* A message handed over: the runner's pl_msg, and whose it is. */
struct lb_msg {
        struct pl_msg m;
        size_t part; /* index in lb->parts (they never move out of order: only appended) */
};

struct loopback {
        struct source src; /* first: a struct source * is a struct loopback * */
        const struct config *cfg;
        struct source_events ev;
        int owned; /* made by loopback_source_new: destroy frees it */
        struct lb_part *parts;
        size_t part_cnt, part_cap;
        struct lb_event *events;
        size_t event_cnt;
        size_t turn; /* the partition the next poll looks at first */
        unsigned polls;
        int closed;
        char *failure;
        int up;
        char why[256];
        void (*on_poll)(struct loopback *lb, void *opaque);
        void *poll_opaque;

        pthread_mutex_t lock; /* the sink's records */
        struct loopback_dead *dead;
        size_t dead_cnt;
        struct loopback_pub *pubs;
        size_t pub_cnt;
        char *refuse_dead; /* NULL: dead letters taken */
        enum sink_fate fate;
        char fate_why[256];
};

/** topic's place in the config; aborts on a topic the config lacks (a test's bug). */
size_t lb_topic_idx(const struct loopback *lb, const char *topic);
/** The partition, created empty when the broker has not seen it. */
struct lb_part *lb_part_get(struct loopback *lb, size_t topic_idx, int32_t partition);
/** The partition or NULL. */
struct lb_part *lb_part_find(const struct loopback *lb, size_t topic_idx, int32_t partition);

/** The partition is no longer this consumer's: its next owner starts at the committed offset (consumer.c). */
void lb_part_unassign(struct lb_part *p);
/** The consumer side's operations (consumer.c). */
extern const struct source_ops lb_source_ops;
/** Free the sink's records (sink.c). */
void lb_sink_free(struct loopback *lb);

#endif
