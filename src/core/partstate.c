/* partstate: what this process knows of each partition it works on — its own last commit, and the crash-loop guard's marks. */
#include "core/partstate.h"

#include "base/mem.h"

#include <stdlib.h>

struct part_state *part_state(struct part_states *ps, size_t topic_idx, int32_t partition)
{
        for (size_t i = 0; i < ps->cnt; i++)
                if (ps->v[i].topic_idx == topic_idx && ps->v[i].partition == partition)
                        return &ps->v[i];
        struct part_state *nv = xrealloc(ps->v, (ps->cnt + 1) * sizeof(*nv));
        ps->v = nv;
        ps->v[ps->cnt] = (struct part_state){.topic_idx = topic_idx,
                                             .partition = partition,
                                             .verified_next = -1,
                                             .own_next = -1,
                                             .counted_at = -1,
                                             .isolate_until = -1};
        return &ps->v[ps->cnt++];
}

void part_states_free(struct part_states *ps)
{
        free(ps->v);
        ps->v = NULL;
        ps->cnt = 0;
}
