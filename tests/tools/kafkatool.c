/* kafkatool: the tests' own Kafka client — create topics, produce workloads, read offsets and dead letters. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "source/kafka/log_transient.h"

static const char *brokers;
static int64_t started_ms;
static int delivered, failed;

static void die(const char *fmt, const char *arg) __attribute__((format(printf, 1, 0)));
static void die(const char *fmt, const char *arg)
{
        fprintf(stderr, "kafkatool: ");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        fprintf(stderr, fmt, arg);
#pragma GCC diagnostic pop
        fprintf(stderr, "\n");
        exit(1);
}

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* librdkafka's own line format, without a fresh broker's transient state (as dedupd does). */
static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
        if (!kafka_log_transient(buf, now_ms() - started_ms))
                fprintf(stderr, "%%%d|%s|%s| %s\n", level, fac, rd_kafka_name(rk), buf);
}

static rd_kafka_conf_t *base_conf(void)
{
        char err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        if (!brokers)
                brokers = getenv("KAFKA_BOOTSTRAP");
        if (!brokers)
                die("%s", "-b BROKERS or KAFKA_BOOTSTRAP is required");
        if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, err, sizeof(err)))
                die("%s", err);
        if (!started_ms)
                started_ms = now_ms();
        rd_kafka_conf_set_log_cb(conf, log_cb);
        return conf;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
        (void)rk;
        (void)opaque;
        if (m->err) {
                failed++;
                fprintf(stderr, "kafkatool: delivery failed: %s\n", rd_kafka_err2str(m->err));
        } else {
                delivered++;
        }
}

static int64_t now_us(clockid_t clock)
{
        struct timespec ts;
        clock_gettime(clock, &ts);
        return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* At most `rate` messages a second: sleep until message n is due (what a
 * sleep overshoots goes out at once after it: no spinning). A message due
 * within PACE_SLACK_US goes now: one wake-up a millisecond, not one a
 * message, which at tens of thousands a second cost the producer more CPU
 * than the messages themselves. */
#define PACE_SLACK_US 1000
static void pace(rd_kafka_t *rk, double rate, int64_t t0, long n)
{
        int64_t ahead = t0 + (int64_t)((double)n * 1e6 / rate) - now_us(CLOCK_MONOTONIC);
        if (ahead > PACE_SLACK_US) {
                struct timespec ts = {ahead / 1000000, (ahead % 1000000) * 1000};
                nanosleep(&ts, NULL);
        }
        rd_kafka_poll(rk, 0);
}

/* What produce and txn share: the topic, partition, headers and -X properties. */
struct produce_opts {
        const char *topic;
        char *hdrs[32], *props[32];
        int nh, np, partition;
        int64_t timestamp; /* -T: every record's CreateTime (epoch ms); 0: now */
};

/* One of produce's and txn's options, or 0 when opt is not one. */
static int produce_opt(struct produce_opts *o, int opt, char *arg)
{
        if (opt == 't')
                o->topic = arg;
        else if (opt == 'H' && o->nh < 32)
                o->hdrs[o->nh++] = arg;
        else if (opt == 'X' && o->np < 32)
                o->props[o->np++] = arg;
        else if (opt == 'p')
                o->partition = atoi(arg);
        else
                return 0;
        return 1;
}

/* An idempotent producer with the -X properties (and transactional.id when txn_id is set). */
static rd_kafka_t *producer_new(const struct produce_opts *o, const char *txn_id)
{
        char err[512];
        rd_kafka_conf_t *conf = base_conf();
        /* The defaults first: a -X property overrides them (linger.ms=1 for a latency run). */
        rd_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof(err));
        rd_kafka_conf_set(conf, "linger.ms", "5", err, sizeof(err));
        for (int i = 0; i < o->np; i++) {
                char *eq = strchr(o->props[i], '=');
                if (!eq)
                        die("-X '%s' is not name=value", o->props[i]);
                *eq = '\0';
                if (rd_kafka_conf_set(conf, o->props[i], eq + 1, err, sizeof(err)))
                        die("%s", err);
        }
        if (txn_id && rd_kafka_conf_set(conf, "transactional.id", txn_id, err, sizeof(err)))
                die("%s", err);
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        if (!rk)
                die("%s", err);
        return rk;
}

/* Produce one line: "KEY<TAB>VALUE" or "VALUE"; "\N" as VALUE is a null value. */
static void produce_line(rd_kafka_t *rk, const struct produce_opts *o, char *line)
{
        char *key = NULL, *val = line, *tab = strchr(line, '\t');
        if (tab) {
                *tab = '\0';
                key = line;
                val = tab + 1;
        }
        int null_value = !strcmp(val, "\\N");
        rd_kafka_headers_t *h = rd_kafka_headers_new(o->nh + 1);
        for (int i = 0; i < o->nh; i++) {
                char *eq = strchr(o->hdrs[i], '=');
                if (!eq)
                        die("header '%s' is not name=value", o->hdrs[i]);
                rd_kafka_header_add(h, o->hdrs[i], eq - o->hdrs[i], eq + 1, -1);
        }
        rd_kafka_resp_err_t e;
        do {
                e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(o->topic), RD_KAFKA_V_PARTITION(o->partition),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                      RD_KAFKA_V_KEY(key, key ? strlen(key) : 0),
                                      RD_KAFKA_V_VALUE(null_value ? NULL : val, null_value ? 0 : strlen(val)),
                                      RD_KAFKA_V_TIMESTAMP(o->timestamp), RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
                if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                        rd_kafka_poll(rk, 50);
        } while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL);
        if (e)
                die("produce: %s", rd_kafka_err2str(e));
        rd_kafka_poll(rk, 0);
}

/* The next stdin line without its newline, or NULL at the end. */
static char *next_line(char **line, size_t *cap)
{
        ssize_t len = getline(line, cap, stdin);
        if (len <= 0)
                return NULL;
        if ((*line)[len - 1] == '\n')
                (*line)[len - 1] = '\0';
        return *line;
}

static int partitions_of(rd_kafka_t *rk, const char *topic);

/* A paced run times each message from its send: connected to the broker,
 * the topic's leaders known and the idempotent producer's id taken before
 * the first, or the first messages' times are the producer's start-up
 * (tens of milliseconds), not the path measured. */
static void producer_warm(rd_kafka_t *rk, const char *topic)
{
        partitions_of(rk, topic);
        for (int i = 0; i < 20; i++)
                rd_kafka_poll(rk, 10);
}

/* produce -t TOPIC [-H name=value]... : one message per stdin line, "KEY<TAB>VALUE"
 * or just "VALUE" (no key). "\N" as VALUE means a null value (tombstone).
 * -r RATE paces the messages; -s FILE writes each one's send time (epoch µs);
 * -T MS gives every record that timestamp (epoch ms). */
static int cmd_produce(int argc, char **argv)
{
        struct produce_opts o = {.partition = RD_KAFKA_PARTITION_UA};
        int opt;
        double rate = 0;
        FILE *sent = NULL;
        while ((opt = getopt(argc, argv, "t:H:p:X:r:s:T:")) != -1) {
                if (opt == 'r')
                        rate = atof(optarg);
                else if (opt == 'T')
                        o.timestamp = strtoll(optarg, NULL, 10);
                else if (opt == 's' && !(sent = fopen(optarg, "w")))
                        die("cannot write %s", optarg);
                else
                        produce_opt(&o, opt, optarg);
        }
        if (!o.topic)
                die("%s", "produce: -t TOPIC required");
        rd_kafka_t *rk = producer_new(&o, NULL);
        char *line = NULL, *l;
        size_t cap = 0;
        long n = 0;
        if (rate > 0)
                producer_warm(rk, o.topic);
        int64_t t0 = now_us(CLOCK_MONOTONIC);
        while ((l = next_line(&line, &cap))) {
                if (rate > 0)
                        pace(rk, rate, t0, n);
                if (sent)
                        fprintf(sent, "%" PRId64 "\n", now_us(CLOCK_REALTIME));
                produce_line(rk, &o, l);
                n++;
        }
        free(line);
        if (sent)
                fclose(sent);
        rd_kafka_flush(rk, 60000);
        rd_kafka_destroy(rk);
        if (failed || delivered != n) {
                fprintf(stderr, "kafkatool: %d of %ld messages not delivered\n", (int)(n - delivered), n);
                return 1;
        }
        return 0;
}

static void txn_check(rd_kafka_error_t *e, const char *what)
{
        if (!e)
                return;
        fprintf(stderr, "kafkatool: txn: %s: %s\n", what, rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        exit(1);
}

/* End the open transaction: commit, or abort. Debian's librdkafka 2.0.2
 * fails abort_transaction against Kafka 3.9 (INVALID_TXN_STATE) unless
 * what was produced is flushed first. */
static void txn_end(rd_kafka_t *rk, int commit)
{
        if (commit) {
                txn_check(rd_kafka_commit_transaction(rk, 60000), "commit_transaction");
                return;
        }
        rd_kafka_flush(rk, 60000);
        txn_check(rd_kafka_abort_transaction(rk, 60000), "abort_transaction");
}

/* txn -t TOPIC -i TRANSACTIONAL_ID [-H name=value]... [-X prop=value]...:
 * stdin lines as for produce, in transactions: a line "#commit" or "#abort"
 * ends the open one that way; what follows the last marker is committed.
 * Prints "committed N aborted M" (messages). */
static int cmd_txn(int argc, char **argv)
{
        struct produce_opts o = {.partition = RD_KAFKA_PARTITION_UA};
        const char *txn_id = NULL;
        int opt;
        while ((opt = getopt(argc, argv, "t:H:p:X:i:")) != -1)
                if (opt == 'i')
                        txn_id = optarg;
                else
                        produce_opt(&o, opt, optarg);
        if (!o.topic || !txn_id)
                die("%s", "txn: -t TOPIC and -i TRANSACTIONAL_ID required");
        rd_kafka_t *rk = producer_new(&o, txn_id);
        txn_check(rd_kafka_init_transactions(rk, 60000), "init_transactions");
        char *line = NULL, *l;
        size_t cap = 0;
        long open = 0, committed = 0, aborted = 0;
        while ((l = next_line(&line, &cap))) {
                int commit = !strcmp(l, "#commit");
                if (commit || !strcmp(l, "#abort")) {
                        if (open)
                                txn_end(rk, commit);
                        *(commit ? &committed : &aborted) += open;
                        open = 0;
                        continue;
                }
                if (!open++)
                        txn_check(rd_kafka_begin_transaction(rk), "begin_transaction");
                produce_line(rk, &o, l);
        }
        if (open)
                txn_end(rk, 1);
        committed += open;
        free(line);
        rd_kafka_flush(rk, 10000); /* the last delivery reports */
        rd_kafka_destroy(rk);
        printf("committed %ld aborted %ld\n", committed, aborted);
        /* Aborted messages are "delivered" too: the broker had them. */
        if (failed || delivered != committed + aborted) {
                fprintf(stderr, "kafkatool: %ld of %ld messages not delivered\n", committed + aborted - delivered,
                        committed + aborted);
                return 1;
        }
        return 0;
}

static int cmd_create(int argc, char **argv)
{
        const char *topic = NULL;
        char *configs[32];
        int parts = 1, opt, nc = 0;
        char err[512];
        while ((opt = getopt(argc, argv, "t:p:c:")) != -1) {
                if (opt == 't')
                        topic = optarg;
                else if (opt == 'p')
                        parts = atoi(optarg);
                else if (opt == 'c' && nc < 32)
                        configs[nc++] = optarg;
        }
        if (!topic)
                die("%s", "create: -t TOPIC required");
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, base_conf(), err, sizeof(err));
        if (!rk)
                die("%s", err);
        rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, parts, 1, err, sizeof(err));
        for (int i = 0; i < nc; i++) {
                char *eq = strchr(configs[i], '=');
                if (!eq)
                        die("-c '%s' is not name=value", configs[i]);
                *eq = '\0';
                if (rd_kafka_NewTopic_set_config(nt, configs[i], eq + 1))
                        die("bad topic config %s", configs[i]);
        }
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
        int rc = 1;
        if (ev) {
                size_t cnt;
                const rd_kafka_topic_result_t **res =
                        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &cnt);
                if (rd_kafka_event_error(ev))
                        fprintf(stderr, "kafkatool: create: %s\n", rd_kafka_event_error_string(ev));
                else if (cnt == 1 && rd_kafka_topic_result_error(res[0]) &&
                         rd_kafka_topic_result_error(res[0]) != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
                        fprintf(stderr, "kafkatool: create %s: %s\n", topic,
                                rd_kafka_topic_result_error_string(res[0]));
                else
                        rc = 0;
                rd_kafka_event_destroy(ev);
        } else {
                fprintf(stderr, "kafkatool: create %s: timed out\n", topic);
        }
        rd_kafka_NewTopic_destroy(nt);
        rd_kafka_queue_destroy(q);
        rd_kafka_destroy(rk);
        /* Wait until the topic's partitions have leaders. */
        for (int i = 0; rc == 0 && i < 100; i++) {
                rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, base_conf(), err, sizeof(err));
                const struct rd_kafka_metadata *md;
                rd_kafka_topic_t *t = rd_kafka_topic_new(p, topic, NULL);
                int ready = 0;
                if (rd_kafka_metadata(p, 0, t, &md, 5000) == 0) {
                        if (md->topic_cnt == 1 && !md->topics[0].err && md->topics[0].partition_cnt == parts) {
                                ready = 1;
                                for (int k = 0; k < parts; k++)
                                        if (md->topics[0].partitions[k].leader < 0)
                                                ready = 0;
                        }
                        rd_kafka_metadata_destroy(md);
                }
                rd_kafka_topic_destroy(t);
                rd_kafka_destroy(p);
                if (ready)
                        break;
                usleep(100000);
        }
        return rc;
}

/* delete -t TOPIC */
static int cmd_delete(int argc, char **argv)
{
        const char *topic = NULL;
        int opt, rc = 1;
        char err[512];
        while ((opt = getopt(argc, argv, "t:")) != -1)
                if (opt == 't')
                        topic = optarg;
        if (!topic)
                die("%s", "delete: -t TOPIC required");
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, base_conf(), err, sizeof(err));
        if (!rk)
                die("%s", err);
        rd_kafka_DeleteTopic_t *dt = rd_kafka_DeleteTopic_new(topic);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_DeleteTopics(rk, &dt, 1, NULL, q);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
        if (ev) {
                size_t cnt;
                const rd_kafka_topic_result_t **res =
                        rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), &cnt);
                if (rd_kafka_event_error(ev))
                        fprintf(stderr, "kafkatool: delete: %s\n", rd_kafka_event_error_string(ev));
                else if (cnt == 1 && rd_kafka_topic_result_error(res[0]))
                        fprintf(stderr, "kafkatool: delete %s: %s\n", topic,
                                rd_kafka_topic_result_error_string(res[0]));
                else
                        rc = 0;
                rd_kafka_event_destroy(ev);
        } else {
                fprintf(stderr, "kafkatool: delete %s: timed out\n", topic);
        }
        rd_kafka_DeleteTopic_destroy(dt);
        rd_kafka_queue_destroy(q);
        rd_kafka_destroy(rk);
        return rc;
}

/* config -t TOPIC NAME: the value of one topic config as the broker has it */
static int cmd_config(int argc, char **argv)
{
        const char *topic = NULL;
        int opt, rc = 1;
        char err[512];
        while ((opt = getopt(argc, argv, "t:")) != -1)
                if (opt == 't')
                        topic = optarg;
        if (!topic || optind >= argc)
                die("%s", "config: -t TOPIC NAME required");
        const char *name = argv[optind];
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, base_conf(), err, sizeof(err));
        if (!rk)
                die("%s", err);
        rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_DescribeConfigs(rk, &res, 1, NULL, q);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
        if (ev && !rd_kafka_event_error(ev)) {
                size_t cnt, ne;
                const rd_kafka_ConfigResource_t **rr =
                        rd_kafka_DescribeConfigs_result_resources(rd_kafka_event_DescribeConfigs_result(ev), &cnt);
                const rd_kafka_ConfigEntry_t **e = cnt == 1 ? rd_kafka_ConfigResource_configs(rr[0], &ne) : NULL;
                for (size_t i = 0; e && i < ne; i++)
                        if (!strcmp(rd_kafka_ConfigEntry_name(e[i]), name)) {
                                printf("%s\n",
                                       rd_kafka_ConfigEntry_value(e[i]) ? rd_kafka_ConfigEntry_value(e[i]) : "");
                                rc = 0;
                        }
        }
        if (rc)
                fprintf(stderr, "kafkatool: config %s %s: not found\n", topic, name);
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_ConfigResource_destroy(res);
        rd_kafka_queue_destroy(q);
        rd_kafka_destroy(rk);
        return rc;
}

static int partitions_of(rd_kafka_t *rk, const char *topic)
{
        const struct rd_kafka_metadata *md;
        rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
        int n = -1;
        if (rd_kafka_metadata(rk, 0, t, &md, 10000) == 0) {
                if (md->topic_cnt == 1 && !md->topics[0].err)
                        n = md->topics[0].partition_cnt;
                rd_kafka_metadata_destroy(md);
        }
        rd_kafka_topic_destroy(t);
        if (n < 0)
                die("cannot read metadata of topic %s", topic);
        return n;
}

/* offsets -t TOPIC [-g GROUP]: "partition low high [committed]" per line and a
 * final "total <sum of high - low> [lag <sum of high - committed>]". */
static int cmd_offsets(int argc, char **argv)
{
        const char *topic = NULL, *group = NULL;
        int opt;
        char err[512];
        while ((opt = getopt(argc, argv, "t:g:")) != -1) {
                if (opt == 't')
                        topic = optarg;
                else if (opt == 'g')
                        group = optarg;
        }
        if (!topic)
                die("%s", "offsets: -t TOPIC required");
        rd_kafka_conf_t *conf = base_conf();
        if (group)
                rd_kafka_conf_set(conf, "group.id", group, err, sizeof(err));
        rd_kafka_t *rk = rd_kafka_new(group ? RD_KAFKA_CONSUMER : RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        if (!rk)
                die("%s", err);
        int n = partitions_of(rk, topic);
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
        for (int p = 0; p < n; p++)
                rd_kafka_topic_partition_list_add(l, topic, p);
        if (group) {
                rd_kafka_resp_err_t e = rd_kafka_committed(rk, l, 10000);
                if (e)
                        die("committed: %s", rd_kafka_err2str(e));
        }
        int64_t total = 0, lag = 0;
        for (int p = 0; p < n; p++) {
                int64_t lo, hi;
                rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, 10000);
                if (e)
                        die("watermarks: %s", rd_kafka_err2str(e));
                total += hi - lo;
                if (group) {
                        int64_t c = l->elems[p].offset;
                        lag += hi - (c >= 0 ? c : lo);
                        printf("%d %" PRId64 " %" PRId64 " %" PRId64 "\n", p, lo, hi, c);
                } else {
                        printf("%d %" PRId64 " %" PRId64 "\n", p, lo, hi);
                }
        }
        if (group)
                printf("total %" PRId64 " lag %" PRId64 "\n", total, lag);
        else
                printf("total %" PRId64 "\n", total);
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_destroy(rk);
        return 0;
}

/* dump -t TOPIC: every record from the beginning to the current end, one line
 * each: "partition offset key value" then "  header=value" lines; -l prints
 * the key's and value's lengths instead of them, -T "partition offset
 * timestamp_ms" only (the record's timestamp: CreateTime or LogAppendTime). */
static int cmd_dump(int argc, char **argv)
{
        const char *topic = NULL;
        int opt, lengths = 0, stamps = 0;
        char err[512];
        while ((opt = getopt(argc, argv, "t:lT")) != -1) {
                if (opt == 't')
                        topic = optarg;
                else if (opt == 'l')
                        lengths = 1;
                else if (opt == 'T')
                        stamps = 1;
        }
        if (!topic)
                die("%s", "dump: -t TOPIC required");
        rd_kafka_conf_t *conf = base_conf();
        rd_kafka_conf_set(conf, "group.id", "kafkatool-dump", err, sizeof(err));
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof(err));
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
        if (!rk)
                die("%s", err);
        int n = partitions_of(rk, topic);
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
        int64_t *hi = calloc((size_t)n, sizeof(*hi));
        int64_t remaining = 0;
        for (int p = 0; p < n; p++) {
                int64_t lo;
                rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi[p], 10000);
                rd_kafka_topic_partition_list_add(l, topic, p)->offset = lo;
                remaining += hi[p] - lo;
        }
        rd_kafka_assign(rk, l);
        time_t deadline = time(NULL) + 60;
        while (remaining > 0 && time(NULL) < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 500);
                if (!m)
                        continue;
                if (!m->err && m->offset < hi[m->partition] && stamps) {
                        printf("%d %" PRId64 " %" PRId64 "\n", m->partition, m->offset,
                               rd_kafka_message_timestamp(m, NULL));
                        remaining--;
                } else if (!m->err && m->offset < hi[m->partition]) {
                        if (lengths)
                                printf("%d %" PRId64 " key=%zu value=%zu%s\n", m->partition, m->offset, m->key_len,
                                       m->len, m->payload ? "" : " (null)");
                        else
                                printf("%d %" PRId64 " %.*s %.*s\n", m->partition, m->offset, (int)m->key_len,
                                       m->key ? (const char *)m->key : "", (int)m->len,
                                       m->payload ? (const char *)m->payload : "");
                        rd_kafka_headers_t *h;
                        if (!rd_kafka_message_headers(m, &h)) {
                                const char *name;
                                const void *v;
                                size_t sz;
                                for (size_t i = 0; !rd_kafka_header_get_all(h, i, &name, &v, &sz); i++)
                                        printf("  %s=%.*s\n", name, (int)sz, v ? (const char *)v : "");
                        }
                        remaining--;
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_topic_partition_list_destroy(l);
        free(hi);
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
        return remaining > 0 ? 1 : 0;
}

/* replay -t TOPIC: re-produce every record currently in the topic into the
 * same topic, unchanged (key, value, headers), as a misbehaving producer would. */
static int cmd_replay(int argc, char **argv)
{
        const char *topic = NULL;
        int opt;
        char err[512];
        while ((opt = getopt(argc, argv, "t:")) != -1)
                if (opt == 't')
                        topic = optarg;
        if (!topic)
                die("%s", "replay: -t TOPIC required");
        rd_kafka_conf_t *cconf = base_conf();
        rd_kafka_conf_set(cconf, "group.id", "kafkatool-replay", err, sizeof(err));
        rd_kafka_conf_set(cconf, "enable.auto.commit", "false", err, sizeof(err));
        rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, cconf, err, sizeof(err));
        rd_kafka_conf_t *pconf = base_conf();
        rd_kafka_conf_set(pconf, "enable.idempotence", "true", err, sizeof(err));
        rd_kafka_conf_set_dr_msg_cb(pconf, dr_cb);
        rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, pconf, err, sizeof(err));
        if (!c || !p)
                die("%s", err);
        int n = partitions_of(c, topic);
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
        int64_t *hi = calloc((size_t)n, sizeof(*hi));
        int64_t remaining = 0, produced = 0;
        for (int i = 0; i < n; i++) {
                int64_t lo;
                rd_kafka_query_watermark_offsets(c, topic, i, &lo, &hi[i], 10000);
                rd_kafka_topic_partition_list_add(l, topic, i)->offset = lo;
                remaining += hi[i] - lo;
        }
        rd_kafka_assign(c, l);
        time_t deadline = time(NULL) + 120;
        while (remaining > 0 && time(NULL) < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 500);
                rd_kafka_poll(p, 0);
                if (!m)
                        continue;
                if (!m->err && m->offset < hi[m->partition]) {
                        rd_kafka_headers_t *h = NULL;
                        rd_kafka_message_detach_headers(m, &h);
                        rd_kafka_resp_err_t e;
                        do {
                                e = rd_kafka_producev(
                                        p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(m->partition),
                                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(m->key, m->key_len),
                                        RD_KAFKA_V_VALUE(m->payload, m->len),
                                        RD_KAFKA_V_HEADERS(h ? h : rd_kafka_headers_new(0)), RD_KAFKA_V_END);
                                if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                                        rd_kafka_poll(p, 50);
                        } while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL);
                        if (e)
                                die("replay produce: %s", rd_kafka_err2str(e));
                        produced++;
                        remaining--;
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_flush(p, 60000);
        rd_kafka_consumer_close(c);
        rd_kafka_destroy(c);
        rd_kafka_destroy(p);
        rd_kafka_topic_partition_list_destroy(l);
        free(hi);
        printf("replayed %" PRId64 " records\n", produced);
        return remaining > 0 || failed ? 1 : 0;
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr,
                        "usage: kafkatool [-b BROKERS] create|delete|config|produce|txn|offsets|dump|replay ...\n"
                        "  create  -t TOPIC -p PARTITIONS [-c topic.config=value]...\n"
                        "  delete  -t TOPIC\n"
                        "  config  -t TOPIC NAME                (one topic config value)\n"
                        "  produce -t TOPIC [-p PARTITION] [-H name=value]... [-X librdkafka.prop=value]...\n"
                        "          [-r MSGS_PER_SEC] [-s SEND_TIMES_FILE]\n"
                        "          < lines (KEY<TAB>VALUE or VALUE)\n"
                        "  txn     -t TOPIC -i TRANSACTIONAL_ID [-p PARTITION] [-H name=value]... [-X prop=value]...\n"
                        "          < lines as for produce; \"#commit\" or \"#abort\" ends a transaction\n"
                        "  offsets -t TOPIC [-g GROUP]\n"
                        "  dump    -t TOPIC [-l]                (-l: key and value lengths, not contents)\n"
                        "  replay  -t TOPIC\n");
                return 2;
        }
        int i = 1;
        if (!strcmp(argv[1], "-b") && argc > 3) {
                brokers = argv[2];
                i = 3;
        }
        const char *cmd = argv[i];
        argc -= i;
        argv += i;
        optind = 1;
        if (!strcmp(cmd, "produce"))
                return cmd_produce(argc, argv);
        if (!strcmp(cmd, "txn"))
                return cmd_txn(argc, argv);
        if (!strcmp(cmd, "create"))
                return cmd_create(argc, argv);
        if (!strcmp(cmd, "delete"))
                return cmd_delete(argc, argv);
        if (!strcmp(cmd, "config"))
                return cmd_config(argc, argv);
        if (!strcmp(cmd, "offsets"))
                return cmd_offsets(argc, argv);
        if (!strcmp(cmd, "dump"))
                return cmd_dump(argc, argv);
        if (!strcmp(cmd, "replay"))
                return cmd_replay(argc, argv);
        die("unknown command %s", cmd);
        return 2;
}
