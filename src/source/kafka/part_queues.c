/* part_queues: one librdkafka queue per assigned partition, read only while the runner does not hold it — a pause that drops nothing. */
#include "source/kafka/part_queues.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"

struct part_queue {
        char *topic;
        int32_t partition;
        rd_kafka_queue_t *q;
        int held;
};

struct kafka_part_queues {
        rd_kafka_t *rk;
        rd_kafka_queue_t *consumer; /* the consumer's queue: rebalances, errors, statistics */
        int wake[2];                /* the pipe librdkafka writes to */
        struct part_queue *parts;
        size_t n, cap, turn; /* turn: the partition read first next time */
};

static const char wake_byte[] = "w";

struct kafka_part_queues *kafka_part_queues_new(rd_kafka_t *rk, char *err, size_t errsz)
{
        struct kafka_part_queues *pq = xcalloc(1, sizeof(*pq));
        pq->rk = rk;
        if (pipe2(pq->wake, O_NONBLOCK | O_CLOEXEC)) {
                snprintf(err, errsz, "pipe: %s", strerror(errno));
                free(pq);
                return NULL;
        }
        pq->consumer = rd_kafka_queue_get_consumer(rk);
        rd_kafka_queue_io_event_enable(pq->consumer, pq->wake[1], wake_byte, 1);
        return pq;
}

static void part_release(struct kafka_part_queues *pq, struct part_queue *p)
{
        rd_kafka_queue_io_event_enable(p->q, -1, NULL, 0);
        rd_kafka_queue_forward(p->q, pq->consumer);
        rd_kafka_queue_destroy(p->q);
        free(p->topic);
}

void kafka_part_queues_revoked(struct kafka_part_queues *pq)
{
        for (size_t i = 0; i < pq->n; i++)
                part_release(pq, &pq->parts[i]);
        pq->n = 0;
        pq->turn = 0;
}

void kafka_part_queues_free(struct kafka_part_queues *pq)
{
        if (!pq)
                return;
        kafka_part_queues_revoked(pq);
        free(pq->parts);
        if (pq->consumer) {
                rd_kafka_queue_io_event_enable(pq->consumer, -1, NULL, 0);
                rd_kafka_queue_destroy(pq->consumer);
        }
        close(pq->wake[0]);
        close(pq->wake[1]);
        free(pq);
}

static int consumed(const struct config *cfg, const char *topic)
{
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                if (!strcmp(cfg->topics[i].name, topic))
                        return 1;
        return 0;
}

void kafka_part_queues_assigned(struct kafka_part_queues *pq, const struct config *cfg,
                                const rd_kafka_topic_partition_list_t *l)
{
        kafka_part_queues_revoked(pq); /* an assignment replaces the one before (eager rebalancing) */
        for (int i = 0; i < l->cnt; i++) {
                const rd_kafka_topic_partition_t *e = &l->elems[i];
                rd_kafka_queue_t *q;
                if (!consumed(cfg, e->topic) || !(q = rd_kafka_queue_get_partition(pq->rk, e->topic, e->partition)))
                        continue;
                if (pq->n == pq->cap) {
                        pq->cap = pq->cap ? 2 * pq->cap : 8;
                        pq->parts = xrealloc(pq->parts, pq->cap * sizeof(*pq->parts));
                }
                rd_kafka_queue_forward(q, NULL);
                rd_kafka_queue_io_event_enable(q, pq->wake[1], wake_byte, 1);
                pq->parts[pq->n++] = (struct part_queue){xstrdup(e->topic), e->partition, q, 0};
        }
}

void kafka_part_queues_hold(struct kafka_part_queues *pq, const char *topic, int32_t partition, int hold)
{
        for (size_t i = 0; i < pq->n; i++)
                if (pq->parts[i].partition == partition && !strcmp(pq->parts[i].topic, topic))
                        pq->parts[i].held = hold;
}

rd_kafka_message_t *kafka_part_queues_next(struct kafka_part_queues *pq)
{
        for (size_t k = 0; k < pq->n; k++) {
                struct part_queue *p = &pq->parts[(pq->turn + k) % pq->n];
                rd_kafka_message_t *m;
                if (p->held || !(m = rd_kafka_consume_queue(p->q, 0)))
                        continue;
                pq->turn = (pq->turn + k + 1) % pq->n;
                return m;
        }
        return NULL;
}

void kafka_part_queues_clear(struct kafka_part_queues *pq)
{
        char buf[256];
        while (read(pq->wake[0], buf, sizeof(buf)) > 0)
                ;
}

int kafka_part_queues_wait(struct kafka_part_queues *pq, int timeout_ms)
{
        struct pollfd p = {.fd = pq->wake[0], .events = POLLIN};
        return poll(&p, 1, timeout_ms) > 0; /* a signal ends the wait: the loop looks at its flags */
}
