/* naive: the benchmark's yardstick — the consumer a team writes by hand: per message claim, effect, COMMIT, offset. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>

/*
 * naive BROKERS TOPIC GROUP CONNINFO NAMESPACE COUNT
 *
 * The seed's pattern ported one to one, in the same language as dedupd so
 * the comparison is about the pattern: for every message, BEGIN; claim its
 * key in dedupd.keys (INSERT ... ON CONFLICT DO NOTHING); when it is new,
 * the transfer handler's debit and ledger row; COMMIT; then store the
 * offset. Exits after COUNT messages, printing how long they took.
 */

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static int ok(PGconn *c, PGresult *r, ExecStatusType want)
{
        int good = PQresultStatus(r) == want;
        if (!good)
                fprintf(stderr, "naive: %s", PQerrorMessage(c));
        PQclear(r);
        return good;
}

/* One message in its own transaction; 0, or -1 on a database error. */
static int apply(PGconn *c, const char *ns, const rd_kafka_message_t *m)
{
        json_error_t jerr;
        json_t *root = json_loadb(m->payload, m->len, 0, &jerr);
        const char *order = NULL;
        json_int_t user = 0, amount = 0;
        char key[128], uid[32], amt[32];
        int rc = -1;

        if (!root || json_unpack(root, "{s:s, s:I, s:I}", "order_id", &order, "user_id", &user, "amount", &amount)) {
                json_decref(root);
                return 0; /* not a payment: skipped */
        }
        snprintf(key, sizeof(key), "%s/PAY", order);
        snprintf(uid, sizeof(uid), "%" JSON_INTEGER_FORMAT, user);
        snprintf(amt, sizeof(amt), "%" JSON_INTEGER_FORMAT, amount);
        if (!ok(c, PQexec(c, "BEGIN"), PGRES_COMMAND_OK))
                goto out;
        const char *pk[2] = {ns, key};
        PGresult *r = PQexecParams(c,
                                   "INSERT INTO dedupd.keys (namespace, idem_key, status) VALUES ($1, $2, 'DONE')"
                                   " ON CONFLICT DO NOTHING RETURNING 1",
                                   2, NULL, pk, NULL, NULL, 0);
        int fresh = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
        if (!ok(c, r, PGRES_TUPLES_OK))
                goto out;
        if (fresh) {
                const char *pd[2] = {amt, uid};
                r = PQexecParams(c,
                                 "UPDATE account SET balance = balance - $1::bigint"
                                 " WHERE user_id = $2::bigint AND balance >= $1::bigint",
                                 2, NULL, pd, NULL, NULL, 0);
                int debited = PQresultStatus(r) == PGRES_COMMAND_OK && atoi(PQcmdTuples(r)) == 1;
                if (!ok(c, r, PGRES_COMMAND_OK))
                        goto out;
                const char *pl[3] = {key, uid, amt};
                if (debited && !ok(c,
                                   PQexecParams(c,
                                                "INSERT INTO transfer_ledger (idem_key, user_id, amount)"
                                                " VALUES ($1, $2::bigint, $3::bigint)",
                                                3, NULL, pl, NULL, NULL, 0),
                                   PGRES_COMMAND_OK))
                        goto out;
        }
        rc = ok(c, PQexec(c, "COMMIT"), PGRES_COMMAND_OK) ? 0 : -1;
out:
        if (rc)
                PQclear(PQexec(c, "ROLLBACK"));
        json_decref(root);
        return rc;
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
        char err[512];
        if (argc != 7) {
                fprintf(stderr, "usage: naive BROKERS TOPIC GROUP CONNINFO NAMESPACE COUNT\n");
                return 2;
        }
        long want = atol(argv[6]), done = 0;
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
        PGconn *c = PQconnectdb(argv[4]);
        if (PQstatus(c) != CONNECTION_OK) {
                fprintf(stderr, "naive: %s", PQerrorMessage(c));
                return 1;
        }
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], err, sizeof(err)) ||
            rd_kafka_conf_set(conf, "group.id", argv[3], err, sizeof(err)) ||
            rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", err, sizeof(err)) ||
            rd_kafka_conf_set(conf, "enable.auto.offset.store", "false", err, sizeof(err))) {
                fprintf(stderr, "naive: %s\n", err);
                return 1;
        }
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
        if (!rk) {
                fprintf(stderr, "naive: %s\n", err);
                return 1;
        }
        rd_kafka_poll_set_consumer(rk);
        rd_kafka_topic_partition_list_t *subs = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(subs, argv[2], RD_KAFKA_PARTITION_UA);
        rd_kafka_subscribe(rk, subs);
        rd_kafka_topic_partition_list_destroy(subs);
        double t0 = 0;
        while (!stop && done < want) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
                if (!m)
                        continue;
                if (!m->err) {
                        if (!t0)
                                t0 = now_s();
                        if (apply(c, argv[5], m)) {
                                rd_kafka_message_destroy(m);
                                break;
                        }
                        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
                        rd_kafka_topic_partition_list_add(l, rd_kafka_topic_name(m->rkt), m->partition)->offset =
                                m->offset + 1;
                        rd_kafka_offsets_store(rk, l);
                        rd_kafka_topic_partition_list_destroy(l);
                        done++;
                }
                rd_kafka_message_destroy(m);
        }
        double secs = t0 ? now_s() - t0 : 0;
        printf("naive: %ld messages in %.2f s: %.0f msgs/s\n", done, secs, secs > 0 ? (double)done / secs : 0.0);
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
        PQfinish(c);
        return done == want ? 0 : 1;
}
