/* queues: what the broker says of the queues and exchange dedupd uses — every queue exists, the dead-letter exchange exists, where dead letters go. */
#include "source/rabbitmq/queues.h"

#include <stdio.h>
#include <string.h>

#include <amqp.h>

#include "base/log.h"
#include "core/retention.h"
#include "source/rabbitmq/connection.h"
#include "source/rabbitmq/management.h"
#include "source/rabbitmq/settings.h"

/* A failed passive declare closes its channel: each check gets its own. */
static enum rmq_check_rc check_queue(amqp_connection_state_t conn, amqp_channel_t ch, const char *name, int log,
                                     int64_t *ready, char *err, size_t errsz)
{
        char what[300];
        int code;
        if (rmq_channel_open(conn, ch, err, errsz))
                return RMQ_CHECK_UNREACHABLE;
        amqp_queue_declare_ok_t *ok =
                amqp_queue_declare(conn, ch, amqp_cstring_bytes(name), 1, 0, 0, 0, amqp_empty_table);
        snprintf(what, sizeof(what), "queue %s", name);
        if (rmq_check(conn, what, &code, err, errsz)) {
                if (code == AMQP_NOT_FOUND)
                        snprintf(err, errsz,
                                 "queue '%s' does not exist (passive queue.declare); declare it "
                                 "(durable) before dedupd consumes it",
                                 name);
                return code == AMQP_NOT_FOUND ? RMQ_CHECK_INVALID : RMQ_CHECK_UNREACHABLE;
        }
        if (ready)
                *ready = ok ? (int64_t)ok->message_count : -1;
        if (log && ok)
                log_info("rabbitmq", "queue %s: %u message(s) ready, %u consumer(s)", name, ok->message_count,
                         ok->consumer_count);
        return RMQ_CHECK_OK;
}

static enum rmq_check_rc check_exchange(amqp_connection_state_t conn, amqp_channel_t ch, const char *name, char *err,
                                        size_t errsz)
{
        int code;
        if (rmq_channel_open(conn, ch, err, errsz))
                return RMQ_CHECK_UNREACHABLE;
        amqp_exchange_declare(conn, ch, amqp_cstring_bytes(name), amqp_cstring_bytes("direct"), 1, 0, 0, 0,
                              amqp_empty_table);
        if (rmq_check(conn, "exchange.declare", &code, err, errsz)) {
                if (code == AMQP_NOT_FOUND)
                        snprintf(err, errsz,
                                 "rabbitmq.dead_letter.exchange '%s' does not exist (passive "
                                 "exchange.declare)",
                                 name);
                return code == AMQP_NOT_FOUND ? RMQ_CHECK_INVALID : RMQ_CHECK_UNREACHABLE;
        }
        return RMQ_CHECK_OK;
}

/* rabbitmq.management_url, NULL when not set: no queue's message TTL can be read. */
static const char *management_url(const struct config *cfg)
{
        const char *url = rmq_conf(cfg)->management_url;
        return url && *url ? url : NULL;
}

/* AMQP shows neither a queue's x-message-ttl argument nor a policy's
 * message-ttl: without the management API, each class that would be
 * compared with them is said to be not checked, as Kafka's lint says of a
 * retention.ms it cannot read. */
static void retention_unchecked(const char *queue, const struct retention_class *c, const char *why)
{
        char keep[64];
        config_format_duration(c->keep_ms, keep, sizeof(keep));
        log_warn("rabbitmq",
                 "queue %s: its message TTL is not checked against retention class '%s' (keep %s): %s. A queue "
                 "with neither x-message-ttl nor a policy's message-ttl keeps messages for ever: give it a "
                 "message TTL of at most %s, or set allow_shorter_than_topic: true if replaying a message older "
                 "than %s is acceptable",
                 queue, c->name, keep, why, keep, keep);
}

/* One queue's message TTL against its class: RMQ_CHECK_INVALID with the
 * message when the class is shorter; a TTL that cannot be read is said. */
static enum rmq_check_rc queue_floor(const struct config *cfg, const char *url, const char *vhost, const char *queue,
                                     const struct retention_class *c, char *err, size_t errsz)
{
        struct rmq_queue_ttl ttl;
        char why[600];
        if (rmq_queue_retention_ms(url, rmq_conf(cfg)->ca_file, vhost, queue, &ttl, why, sizeof(why))) {
                char said[700];
                snprintf(said, sizeof(said), "could not read x-message-ttl nor the policy's message-ttl: %s", why);
                retention_unchecked(queue, c, said);
                return RMQ_CHECK_OK;
        }
        struct retention_holder h = {"queue", queue, ttl.said};
        if (retention_compare(&h, c, ttl.ms, NULL, err, errsz))
                return RMQ_CHECK_INVALID;
        log_debug("rabbitmq", "queue %s: %s, class '%s' keeps keys long enough", queue, ttl.said, c->name);
        return RMQ_CHECK_OK;
}

enum rmq_check_rc rmq_queues_retention(const struct config *cfg, const char *url, char *err, size_t errsz)
{
        char vhost[256];
        rmq_vhost(cfg, vhost, sizeof(vhost));
        for (size_t t = 0; t < cfg->topic_cnt; t++) {
                const struct retention_class *c = cfg->topics[t].retention;
                if (!c || c->allow_shorter_than_topic)
                        continue;
                if (!url || !*url)
                        retention_unchecked(cfg->topics[t].name, c,
                                            "AMQP does not show a queue's x-message-ttl argument nor a "
                                            "policy's message-ttl; set rabbitmq.management_url to read them "
                                            "from the management API");
                else if (queue_floor(cfg, url, vhost, cfg->topics[t].name, c, err, errsz) != RMQ_CHECK_OK)
                        return RMQ_CHECK_INVALID;
        }
        return RMQ_CHECK_OK;
}

enum rmq_check_rc rmq_queues_check(const struct config *cfg, int log, char *err, size_t errsz)
{
        enum rmq_check_rc rc = RMQ_CHECK_OK;
        amqp_connection_state_t conn = rmq_connect(cfg, 0, err, errsz);
        if (!conn)
                return RMQ_CHECK_UNREACHABLE;
        for (size_t t = 0; t < cfg->topic_cnt && rc == RMQ_CHECK_OK; t++)
                rc = check_queue(conn, (amqp_channel_t)(t + 1), cfg->topics[t].name, log, NULL, err, errsz);
        if (rc == RMQ_CHECK_OK && *rmq_conf(cfg)->dlx)
                rc = check_exchange(conn, (amqp_channel_t)(cfg->topic_cnt + 1), rmq_conf(cfg)->dlx, err, errsz);
        if (rc == RMQ_CHECK_OK && log && !*rmq_conf(cfg)->dlx)
                log_warn("rabbitmq", "rabbitmq.dead_letter.exchange is not set: an unkeyable message is rejected "
                                     "(requeue=false) to its queue's own dead-letter exchange, without dedupd's "
                                     "reason headers; a queue without x-dead-letter-exchange (argument or policy) "
                                     "drops it");
        if (rc == RMQ_CHECK_OK)
                rc = rmq_queues_retention(cfg, management_url(cfg), err, errsz);
        rmq_disconnect(conn);
        return rc;
}

enum rmq_check_rc rmq_queues_depth(const struct config *cfg, int64_t *ready, char *err, size_t errsz)
{
        enum rmq_check_rc rc = RMQ_CHECK_OK;
        amqp_connection_state_t conn = rmq_connect(cfg, 0, err, errsz);
        if (!conn)
                return RMQ_CHECK_UNREACHABLE;
        for (size_t t = 0; t < cfg->topic_cnt && rc == RMQ_CHECK_OK; t++)
                rc = check_queue(conn, (amqp_channel_t)(t + 1), cfg->topics[t].name, 0, &ready[t], err, errsz);
        rmq_disconnect(conn);
        return rc;
}
