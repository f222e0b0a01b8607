/* positions: where each assigned Kafka partition stands — handed over, acknowledged, and the offsets librdkafka proved hold nothing for dedupd. */
#include "source/kafka/positions.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

struct kpart {
        size_t topic_idx;
        int32_t partition;
        int64_t delivered; /* the last message handed over + 1; -1: none since it started */
        int64_t acked;     /* acknowledged up to here, or where it started; -1: not known */
};

struct kafka_positions {
        struct kpart *parts;
        size_t cnt, cap;
        size_t last; /* the last one found: messages come in runs of one partition */
};

struct kafka_positions *kafka_positions_new(void) { return xcalloc(1, sizeof(struct kafka_positions)); }

void kafka_positions_free(struct kafka_positions *kp)
{
        if (!kp)
                return;
        free(kp->parts);
        free(kp);
}

static struct kpart *find(struct kafka_positions *kp, size_t topic_idx, int32_t partition)
{
        if (kp->last < kp->cnt && kp->parts[kp->last].topic_idx == topic_idx &&
            kp->parts[kp->last].partition == partition)
                return &kp->parts[kp->last];
        for (size_t i = 0; i < kp->cnt; i++)
                if (kp->parts[i].topic_idx == topic_idx && kp->parts[i].partition == partition) {
                        kp->last = i;
                        return &kp->parts[i];
                }
        return NULL;
}

/* The partition starts at offset (-1: not known): nothing handed over yet. */
static void start_at(struct kafka_positions *kp, size_t topic_idx, int32_t partition, int64_t offset)
{
        struct kpart *p = find(kp, topic_idx, partition);
        if (!p) {
                if (kp->cnt == kp->cap) {
                        kp->cap = kp->cap ? kp->cap * 2 : 16;
                        kp->parts = xrealloc(kp->parts, kp->cap * sizeof(*kp->parts));
                }
                p = &kp->parts[kp->cnt++];
        }
        *p = (struct kpart){topic_idx, partition, -1, offset >= 0 ? offset : -1};
}

static int topic_of(const struct config *cfg, const char *name, size_t *idx)
{
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                if (!strcmp(cfg->topics[i].name, name)) {
                        *idx = i;
                        return 0;
                }
        return -1;
}

void kafka_positions_assigned(struct kafka_positions *kp, const struct config *cfg,
                              const rd_kafka_topic_partition_list_t *l)
{
        size_t t;
        for (int i = 0; i < l->cnt; i++)
                if (!topic_of(cfg, l->elems[i].topic, &t))
                        start_at(kp, t, l->elems[i].partition, l->elems[i].offset);
}

void kafka_positions_moved(struct kafka_positions *kp, size_t topic_idx, int32_t partition, int64_t offset)
{
        start_at(kp, topic_idx, partition, offset);
}

void kafka_positions_revoked(struct kafka_positions *kp, const struct config *cfg,
                             const rd_kafka_topic_partition_list_t *l)
{
        size_t keep = 0, t;
        for (size_t i = 0; i < kp->cnt; i++) {
                int gone = !l;
                for (int k = 0; l && k < l->cnt && !gone; k++)
                        gone = l->elems[k].partition == kp->parts[i].partition &&
                               !topic_of(cfg, l->elems[k].topic, &t) && t == kp->parts[i].topic_idx;
                if (!gone)
                        kp->parts[keep++] = kp->parts[i];
        }
        kp->cnt = keep;
        kp->last = 0;
}

void kafka_positions_delivered(struct kafka_positions *kp, size_t topic_idx, int32_t partition, int64_t offset)
{
        struct kpart *p = find(kp, topic_idx, partition);
        if (p)
                p->delivered = offset + 1;
}

void kafka_positions_acked(struct kafka_positions *kp, size_t topic_idx, int32_t partition, int64_t next_offset)
{
        struct kpart *p = find(kp, topic_idx, partition);
        if (p)
                p->acked = next_offset;
}

/* Nothing of p is outstanding: every message handed over is acknowledged. */
static int settled(const struct kpart *p) { return p->delivered < 0 || (p->acked >= 0 && p->delivered <= p->acked); }

size_t kafka_positions_skipped(struct kafka_positions *kp, rd_kafka_t *rk, const struct config *cfg,
                               struct pl_skip *out, size_t max)
{
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)(kp->cnt ? kp->cnt : 1));
        size_t idx[kp->cnt ? kp->cnt : 1], n = 0;
        for (size_t i = 0; i < kp->cnt; i++)
                if (settled(&kp->parts[i])) {
                        rd_kafka_topic_partition_list_add(l, cfg->topics[kp->parts[i].topic_idx].name,
                                                          kp->parts[i].partition);
                        idx[l->cnt - 1] = i;
                }
        /* The application's position: past the last message served and the
         * markers and aborted records served after it (RD_KAFKA_OFFSET_INVALID
         * until the first of them since the assignment or a seek). */
        rd_kafka_position(rk, l);
        for (int i = 0; i < l->cnt && n < max; i++) {
                const struct kpart *p = &kp->parts[idx[i]];
                int64_t pos = l->elems[i].offset;
                if (l->elems[i].err || pos < 0 || (p->acked >= 0 && pos <= p->acked) || pos <= p->delivered)
                        continue;
                out[n++] = (struct pl_skip){p->topic_idx, p->partition, p->acked, pos};
        }
        rd_kafka_topic_partition_list_destroy(l);
        return n;
}
