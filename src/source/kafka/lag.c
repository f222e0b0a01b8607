/* lag: dedupctl verify's lag on Kafka — per partition, the high watermark against dedupd's position and the group's committed offset. */
#include "source/kafka/lag.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <librdkafka/rdkafka.h>

#include "pg/offsets.h"
#include "source/kafka/client.h"

/* High watermark minus dedupd's next offset and minus Kafka's committed
 * offset, per partition of every configured topic. */
int kafka_lag(struct store *s, const struct config *cfg, FILE *out, int expect_caught_up, broker_finding_fn finding,
              void *opaque, char *err, size_t errsz)
{
        char line[768];
        const char *group = kafka_property(cfg, "group.id");
        rd_kafka_t *rk = kafka_client(cfg, RD_KAFKA_CONSUMER, KAFKA_ROLE_CLIENT, group, err, errsz);
        int64_t db_total = 0, kafka_total = 0;
        int rc = -1;

        if (!rk)
                return -1;
        fprintf(out, "\nlag (group %s: high watermark minus position; no position counts from the low watermark)\n",
                group ? group : "?");
        fprintf(out, "  %-24s %9s %12s %12s %9s %12s %9s\n", "topic", "partition", "high", "dedupd", "lag", "kafka",
                "lag");
        for (size_t t = 0; t < cfg->topic_cnt; t++) {
                const char *topic = cfg->topics[t].name;
                int n = kafka_partition_count(rk, topic, err, errsz);
                struct store_position *pos = NULL;
                size_t npos = 0;
                rd_kafka_topic_partition_list_t *l;
                rd_kafka_resp_err_t e;

                if (n < 0)
                        goto out;
                if (store_positions(s, cfg->namespace, topic, &pos, &npos, err, errsz))
                        goto out;
                l = rd_kafka_topic_partition_list_new(n);
                for (int p = 0; p < n; p++)
                        rd_kafka_topic_partition_list_add(l, topic, p);
                if ((e = rd_kafka_committed(rk, l, KAFKA_TIMEOUT_MS))) {
                        snprintf(err, errsz, "committed offsets of group %s: %s", group, rd_kafka_err2str(e));
                        rd_kafka_topic_partition_list_destroy(l);
                        free(pos);
                        goto out;
                }
                for (int p = 0; p < n && !e; p++) {
                        int64_t lo, hi, db = -1, kc = l->elems[p].offset;
                        if ((e = rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, KAFKA_TIMEOUT_MS))) {
                                snprintf(err, errsz, "watermarks of %s/%d: %s", topic, p, rd_kafka_err2str(e));
                                break;
                        }
                        for (size_t k = 0; k < npos; k++)
                                if (pos[k].partition == p)
                                        db = pos[k].next_offset;
                        int64_t dlag = hi - (db >= 0 ? db : lo), klag = hi - (kc >= 0 ? kc : lo);
                        char dbs[24] = "-", ks[24] = "-";
                        if (db >= 0)
                                snprintf(dbs, sizeof(dbs), "%" PRId64, db);
                        if (kc >= 0)
                                snprintf(ks, sizeof(ks), "%" PRId64, kc);
                        fprintf(out, "  %-24s %9d %12" PRId64 " %12s %9" PRId64 " %12s %9" PRId64 "\n", topic, p, hi,
                                dbs, dlag, ks, klag);
                        db_total += dlag;
                        kafka_total += klag;
                        if (!expect_caught_up || (dlag <= 0 && klag <= 0))
                                continue;
                        snprintf(line, sizeof(line),
                                 "lag: %s/%d is not caught up: high watermark %" PRId64 ", dedupd at %s (lag %" PRId64
                                 "), Kafka's committed offset %s (lag %" PRId64 ")",
                                 topic, p, hi, dbs, dlag, ks, klag);
                        finding(opaque, line);
                }
                rd_kafka_topic_partition_list_destroy(l);
                free(pos);
                if (e)
                        goto out;
        }
        fprintf(out, "  %-24s %9s %12s %12s %9" PRId64 " %12s %9" PRId64 "\n", "total", "", "", "", db_total, "",
                kafka_total);
        rc = 0;
out:
        rd_kafka_destroy(rk);
        return rc;
}
