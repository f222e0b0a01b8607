/* partstate: what this process knows of each partition it works on — its own last commit, and the crash-loop guard's marks. */
#ifndef DEDUPD_CORE_PARTSTATE_H
#define DEDUPD_CORE_PARTSTATE_H

#include <stddef.h>
#include <stdint.h>

struct part_state {
        size_t topic_idx;
        int32_t partition;
        int64_t verified_next; /* next offset after this process's last commit, -1: none */
        int64_t own_next;      /* the highest next offset this process committed since positioned, -1: none */
        int64_t counted_at;    /* a start this process counted whose range is not all committed, -1: none */
        int64_t counted_until; /* ... the end of that range (its row goes once a commit reaches it) */
        int counted_single;    /* ... counted as one message run alone */
        int64_t isolate_until; /* one message per batch below this offset */
        int had_attempts;      /* rows may exist in dedupd.attempts */
};

struct part_states {
        struct part_state *v;
        size_t cnt;
};

/** The state of a partition, created (all unknown) on first use. */
struct part_state *part_state(struct part_states *ps, size_t topic_idx, int32_t partition);
void part_states_free(struct part_states *ps);

#endif
