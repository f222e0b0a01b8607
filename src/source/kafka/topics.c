/* topics: what the broker says of the topics dedupd reads and writes — existence, retention, record size limits. */
#include "source/kafka/topics.h"

#include "base/mem.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "base/log.h"
#include "source/kafka/client.h"
#include "source/kafka/settings.h"
#include "core/retention.h"

enum topic_state { TOPIC_UNKNOWN = 0, TOPIC_FOUND, TOPIC_MISSING };

/* What the broker said of one topic. */
struct facts {
        const char *name;
        enum topic_state state;
        char why[256];      /* TOPIC_UNKNOWN: why not */
        char retention[32]; /* retention.ms as the broker returned it, "" if not */
        char policy[64];    /* cleanup.policy */
        int64_t max_bytes;  /* max.message.bytes, -1 if not returned */
};

struct check {
        const struct config *cfg;
        topics_report_cb *report;
        void *opaque;
        char *err;
        size_t errsz;
        int errors;
        struct facts *facts;
        size_t nfacts;
        char last_error[512]; /* librdkafka's last word on the connection, e.g. "Connection refused" */
        int last_code;        /* ...and its code: RD_KAFKA_RESP_ERR__SSL, __AUTHENTICATION */
};

static void say(struct check *ck, enum topics_severity sev, int line, int col, const char *msg)
{
        if (sev == TOPICS_ERROR && !ck->errors++)
                snprintf(ck->err, ck->errsz, "%s", msg);
        if (ck->report)
                ck->report(ck->opaque, sev, ck->cfg->path, line, col, msg);
        else if (sev == TOPICS_ERROR)
                log_error("topics", "%s:%d:%d: %s", ck->cfg->path, line, col, msg);
        else
                log_warn("topics", "%s", msg);
}

static struct facts *facts_of(struct check *ck, const char *name)
{
        for (size_t i = 0; i < ck->nfacts; i++)
                if (!strcmp(ck->facts[i].name, name))
                        return &ck->facts[i];
        return NULL;
}

/* Every consumed and dead-letter topic, once each. */
static void facts_init(struct check *ck)
{
        const struct config *cfg = ck->cfg;
        ck->facts = xcalloc(2 * cfg->topic_cnt + 1, sizeof(*ck->facts));
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                const char *names[2] = {cfg->topics[i].name, cfg->topics[i].dlq_topic};
                for (int k = 0; k < 2; k++)
                        if (names[k] && !facts_of(ck, names[k]))
                                ck->facts[ck->nfacts++] = (struct facts){.name = names[k], .max_bytes = -1};
        }
}

/* Wait for one admin result on q; NULL with why on a timeout or a request
 * error, *code saying which (RD_KAFKA_RESP_ERR__TIMED_OUT when none came). */
static rd_kafka_event_t *admin_wait(rd_kafka_queue_t *q, int timeout_ms, rd_kafka_resp_err_t *code, char *why,
                                    size_t whysz)
{
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
        if (!ev) {
                *code = RD_KAFKA_RESP_ERR__TIMED_OUT;
                snprintf(why, whysz, "no answer within %d ms", timeout_ms);
                return NULL;
        }
        if ((*code = rd_kafka_event_error(ev))) {
                snprintf(why, whysz, "%s", rd_kafka_event_error_string(ev));
                rd_kafka_event_destroy(ev);
                return NULL;
        }
        return ev;
}

static void facts_from_resource(struct check *ck, const rd_kafka_ConfigResource_t *res)
{
        struct facts *f = facts_of(ck, rd_kafka_ConfigResource_name(res));
        rd_kafka_resp_err_t e = rd_kafka_ConfigResource_error(res);
        const rd_kafka_ConfigEntry_t **entries;
        size_t cnt;

        if (!f)
                return;
        if (e == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
                f->state = TOPIC_MISSING;
                return;
        }
        if (e) {
                f->state = TOPIC_UNKNOWN;
                snprintf(f->why, sizeof(f->why), "%s",
                         rd_kafka_ConfigResource_error_string(res) ? rd_kafka_ConfigResource_error_string(res)
                                                                   : rd_kafka_err2str(e));
                return;
        }
        f->state = TOPIC_FOUND;
        entries = rd_kafka_ConfigResource_configs(res, &cnt);
        for (size_t i = 0; i < cnt; i++) {
                const char *name = rd_kafka_ConfigEntry_name(entries[i]);
                const char *value = rd_kafka_ConfigEntry_value(entries[i]);
                if (!value)
                        continue;
                if (!strcmp(name, "retention.ms"))
                        snprintf(f->retention, sizeof(f->retention), "%s", value);
                else if (!strcmp(name, "cleanup.policy"))
                        snprintf(f->policy, sizeof(f->policy), "%s", value);
                else if (!strcmp(name, "max.message.bytes"))
                        f->max_bytes = strtoll(value, NULL, 10);
        }
}

/* Describe the topics named in facts (only those in state `which`): 0, or
 * TOPICS_UNREACHABLE when no broker answered, TOPICS_INVALID when one
 * refused the request (why says what). */
static int describe(struct check *ck, rd_kafka_t *rk, enum topic_state which, int timeout_ms, char *why, size_t whysz)
{
        rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_NO_ERROR;
        rd_kafka_ConfigResource_t *res[ck->nfacts ? ck->nfacts : 1];
        rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_event_t *ev = NULL;
        size_t n = 0;
        int rc = TOPICS_INVALID;

        for (size_t i = 0; i < ck->nfacts; i++) {
                if (ck->facts[i].state != which)
                        continue;
                /* NULL for a name librdkafka will not ask about (""): the config check refuses those,
                 * and DescribeConfigs must never be handed one. */
                if (!(res[n] = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, ck->facts[i].name)))
                        snprintf(ck->facts[i].why, sizeof(ck->facts[i].why), "'%s' is not a topic name",
                                 ck->facts[i].name);
                else
                        n++;
        }
        if (!n) {
                rc = 0;
                goto out;
        }
        if (rd_kafka_AdminOptions_set_request_timeout(opts, timeout_ms, why, whysz)) {
                rc = TOPICS_INVALID;
                goto out;
        }
        rd_kafka_DescribeConfigs(rk, res, n, opts, q);
        ev = admin_wait(q, timeout_ms, &code, why, whysz);
        if (!ev) {
                rc = kafka_err_unreachable(code) ? TOPICS_UNREACHABLE : TOPICS_INVALID;
                goto out;
        }
        size_t cnt = 0;
        const rd_kafka_ConfigResource_t **rr =
                rd_kafka_DescribeConfigs_result_resources(rd_kafka_event_DescribeConfigs_result(ev), &cnt);
        for (size_t i = 0; i < cnt; i++)
                facts_from_resource(ck, rr[i]);
        rc = 0;
out:
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_AdminOptions_destroy(opts);
        rd_kafka_ConfigResource_destroy_array(res, n);
        return rc;
}

/* What a dead-letter topic must hold: the largest payload let through, its
 * headers, and — when dedupd sizes it — whatever the topic itself holds. */
static int64_t dlq_need(const struct topic_conf *t) { return (int64_t)t->max_payload_bytes + TOPICS_DLQ_HEADROOM; }

static int64_t dlq_create_size(const struct topic_conf *t, const struct facts *src)
{
        int64_t want = dlq_need(t);
        if (src && src->max_bytes > 0 && src->max_bytes + TOPICS_DLQ_HEADROOM > want)
                want = src->max_bytes + TOPICS_DLQ_HEADROOM;
        return want;
}

/* Create the missing dead-letter topics whose topic says dead_letter.create. */
static void create_dlqs(struct check *ck, rd_kafka_t *rk, int timeout_ms)
{
        const struct config *cfg = ck->cfg;
        rd_kafka_NewTopic_t *nt[cfg->topic_cnt ? cfg->topic_cnt : 1];
        const char *names[cfg->topic_cnt ? cfg->topic_cnt : 1];
        size_t n = 0;
        char why[512], size[24];

        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                const struct topic_conf *t = &cfg->topics[i];
                struct facts *d = facts_of(ck, t->dlq_topic);
                int queued = 0;
                if (!t->dlq_create || d->state != TOPIC_MISSING)
                        continue;
                for (size_t k = 0; k < n; k++)
                        queued |= !strcmp(names[k], t->dlq_topic);
                if (queued)
                        continue;
                nt[n] = rd_kafka_NewTopic_new(t->dlq_topic, -1, -1, why, sizeof(why));
                if (!nt[n])
                        continue;
                snprintf(size, sizeof(size), "%" PRId64, dlq_create_size(t, facts_of(ck, t->name)));
                rd_kafka_NewTopic_set_config(nt[n], "max.message.bytes", size);
                names[n++] = t->dlq_topic;
        }
        if (!n)
                return;
        rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_AdminOptions_set_operation_timeout(opts, timeout_ms, why, sizeof(why));
        rd_kafka_CreateTopics(rk, nt, n, opts, q);
        rd_kafka_resp_err_t code;
        rd_kafka_event_t *ev = admin_wait(q, timeout_ms, &code, why, sizeof(why));
        if (ev) {
                size_t cnt = 0;
                const rd_kafka_topic_result_t **res =
                        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &cnt);
                for (size_t i = 0; i < cnt; i++) {
                        const char *name = rd_kafka_topic_result_name(res[i]);
                        rd_kafka_resp_err_t e = rd_kafka_topic_result_error(res[i]);
                        if (!e || e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
                                facts_of(ck, name)->state = TOPIC_UNKNOWN; /* described again below */
                                log_info("topics", "dead-letter topic %s %s (dead_letter.create)", name,
                                         e ? "was created meanwhile by someone else" : "created");
                        } else {
                                log_error("topics", "could not create dead-letter topic %s: %s", name,
                                          rd_kafka_topic_result_error_string(res[i]));
                        }
                }
                rd_kafka_event_destroy(ev);
        } else {
                log_error("topics", "could not create dead-letter topics: %s", why);
        }
        rd_kafka_queue_destroy(q);
        rd_kafka_AdminOptions_destroy(opts);
        rd_kafka_NewTopic_destroy_array(nt, n);
}

/* Where the tool is not kafka-topics.sh (Confluent's packages, the project's scripts/services install). */
#define KAFKA_TOPICS_TOOL_NOTE "; the tool is bin/kafka-topics in some installations"

static void check_source(struct check *ck, const struct topic_conf *t, const struct facts *src)
{
        char msg[1024];
        if (src->state != TOPIC_MISSING)
                return;
        snprintf(msg, sizeof(msg),
                 "topic %s does not exist on the broker: create it (kafka-topics.sh --bootstrap-server %s "
                 "--create --topic %s --partitions N" KAFKA_TOPICS_TOOL_NOTE "; with the project's own servers: "
                 "scripts/services topic %s N) or correct the name",
                 t->name, kafka_bootstrap(ck->cfg), t->name, t->name);
        say(ck, TOPICS_ERROR, t->line, t->col, msg);
}

static void check_dlq(struct check *ck, enum topics_mode mode, const struct topic_conf *t, const struct facts *d)
{
        char msg[1200];
        int64_t need = dlq_need(t);
        if (d->state == TOPIC_MISSING && t->dlq_create && mode == TOPICS_CHECK_ONLY) {
                snprintf(msg, sizeof(msg),
                         "dead-letter topic %s (of topic %s) does not exist yet: dedupd creates it at start "
                         "(dead_letter.create)",
                         t->dlq_topic, t->name);
                say(ck, TOPICS_WARN, t->line, t->col, msg);
        } else if (d->state == TOPIC_MISSING) {
                snprintf(msg, sizeof(msg),
                         "dead-letter topic %s (of topic %s) does not exist: the first message that cannot "
                         "be processed would wait for it forever; create it (kafka-topics.sh "
                         "--bootstrap-server %s --create --topic %s --partitions 1 --config "
                         "max.message.bytes=%" PRId64 KAFKA_TOPICS_TOOL_NOTE ") or set dead_letter.create: true",
                         t->dlq_topic, t->name, kafka_bootstrap(ck->cfg), t->dlq_topic,
                         dlq_create_size(t, facts_of(ck, t->name)));
                say(ck, TOPICS_ERROR, t->line, t->col, msg);
        } else if (d->state == TOPIC_FOUND && d->max_bytes >= 0 && d->max_bytes < need) {
                snprintf(msg, sizeof(msg),
                         "dead-letter topic %s accepts records of at most %" PRId64 " bytes "
                         "(max.message.bytes) but topic %s lets payloads of %d bytes through "
                         "(max_payload_bytes): their dead letters need up to %" PRId64 " bytes with headers; "
                         "raise it (kafka-configs.sh --bootstrap-server %s --alter --entity-type topics "
                         "--entity-name %s --add-config max.message.bytes=%" PRId64 ") or set "
                         "max_payload_bytes to at most %" PRId64,
                         t->dlq_topic, d->max_bytes, t->name, t->max_payload_bytes, need, kafka_bootstrap(ck->cfg),
                         t->dlq_topic, need, d->max_bytes - TOPICS_DLQ_HEADROOM);
                say(ck, TOPICS_ERROR, t->line, t->col, msg);
        }
}

static void check_retention(struct check *ck, const struct topic_conf *t, const struct facts *src)
{
        const struct retention_class *c = t->retention;
        char msg[1024], *end;
        if (!c || c->allow_shorter_than_topic || src->state == TOPIC_MISSING)
                return;
        if (src->state == TOPIC_UNKNOWN || !src->retention[0]) {
                snprintf(msg, sizeof(msg),
                         "could not read retention.ms of topic %s: %s (the topic's retention is not "
                         "checked against class '%s')",
                         t->name, src->state == TOPIC_UNKNOWN ? src->why : "the broker did not return it", c->name);
                say(ck, TOPICS_WARN, c->line, c->col, msg);
                return;
        }
        errno = 0;
        long long ms = strtoll(src->retention, &end, 10);
        if (errno || end == src->retention || *end) {
                snprintf(msg, sizeof(msg), "could not read retention.ms of topic %s: the broker returned '%s'", t->name,
                         src->retention);
                say(ck, TOPICS_WARN, c->line, c->col, msg);
                return;
        }
        char setting[64];
        snprintf(setting, sizeof(setting), "retention.ms=%lld", ms);
        struct retention_holder h = {"topic", t->name, setting};
        if (retention_compare(&h, c, ms, src->policy[0] ? src->policy : NULL, msg, sizeof(msg)))
                say(ck, TOPICS_ERROR, c->line, c->col, msg);
        else
                log_debug("topics", "topic %s: retention.ms=%lld, class '%s' keeps keys long enough", t->name, ms,
                          c->name);
}

/* The broker answered but would not describe the topics (an ACL, say): say
 * so once per topic, then go on. */
static void unanswered(struct check *ck, const char *why)
{
        char msg[1024];
        for (size_t i = 0; i < ck->cfg->topic_cnt; i++) {
                const struct topic_conf *t = &ck->cfg->topics[i];
                snprintf(msg, sizeof(msg),
                         "could not ask the broker about topic %s and its dead-letter topic %s: %s (not "
                         "checked: that both exist, that dead letters fit%s)",
                         t->name, t->dlq_topic, why, t->retention ? ", the retention class" : "");
                say(ck, TOPICS_WARN, t->line, t->col, msg);
        }
}

/* librdkafka reports why it cannot connect through the error callback, on
 * the main queue: kept so that "unreachable" can say why. */
static void admin_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
        struct check *ck = opaque;
        (void)rk;
        /* A handshake the peer ends (a certificate it or we refuse) can come
         * as a transport error carrying OpenSSL's reason: a TLS failure all
         * the same, which waiting will not mend. */
        if (err == RD_KAFKA_RESP_ERR__TRANSPORT && strstr(reason, "in state SSL_HANDSHAKE"))
                err = RD_KAFKA_RESP_ERR__SSL;
        /* "1/1 brokers are down" says less than the refusal before it. */
        if (err != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || !ck->last_error[0]) {
                snprintf(ck->last_error, sizeof(ck->last_error), "%s", reason);
                ck->last_code = err;
        }
}

static rd_kafka_t *admin_client(struct check *ck, char *why, size_t whysz)
{
        rd_kafka_conf_t *conf = kafka_conf(ck->cfg, KAFKA_ROLE_ADMIN, NULL, why, whysz);
        rd_kafka_t *rk;
        if (!conf)
                return NULL;
        rd_kafka_conf_set_opaque(conf, ck);
        rd_kafka_conf_set_error_cb(conf, admin_error_cb);
        if (!(rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, whysz)))
                rd_kafka_conf_destroy(conf); /* on success conf is owned by rk */
        return rk;
}

/* Where bootstrap.servers is written, for the message that names it. */
static void bootstrap_pos(const struct config *cfg, int *line, int *col)
{
        const struct config_kvs *props = kafka_props(cfg);
        *line = *col = 0;
        for (size_t i = 0; i < props->n; i++)
                if (!strcmp(props->v[i].name, "bootstrap.servers") ||
                    !strcmp(props->v[i].name, "metadata.broker.list")) {
                        *line = props->v[i].line;
                        *col = props->v[i].col;
                }
}

/* No broker answered: one message naming them, nothing else is known. A
 * failed TLS handshake or SASL authentication says so and what to check:
 * TOPICS_REFUSED; else TOPICS_UNREACHABLE. */
static enum topics_rc unreachable(struct check *ck, rd_kafka_t *rk, int timeout_ms, const char *why)
{
        char msg[1400];
        int line, col;
        enum topics_rc rc = TOPICS_REFUSED;
        rd_kafka_poll(rk, 0); /* serves the error callback */
        if (ck->last_code == RD_KAFKA_RESP_ERR__SSL)
                snprintf(msg, sizeof(msg),
                         "the TLS handshake with the Kafka broker(s) at %s (bootstrap.servers) failed (check "
                         "ssl.ca.location and the broker's certificate): %s",
                         kafka_bootstrap(ck->cfg), ck->last_error);
        else if (ck->last_code == RD_KAFKA_RESP_ERR__AUTHENTICATION)
                snprintf(msg, sizeof(msg),
                         "the Kafka broker(s) at %s (bootstrap.servers) refused the SASL authentication (check "
                         "sasl.mechanisms, sasl.username and sasl.password): %s",
                         kafka_bootstrap(ck->cfg), ck->last_error);
        else {
                rc = TOPICS_UNREACHABLE;
                snprintf(msg, sizeof(msg),
                         "cannot reach the Kafka broker(s) at %s (bootstrap.servers) within %d ms: %s%s%s",
                         kafka_bootstrap(ck->cfg), timeout_ms, why, ck->last_error[0] ? "; last error: " : "",
                         ck->last_error);
        }
        snprintf(ck->err, ck->errsz, "%s", msg);
        bootstrap_pos(ck->cfg, &line, &col);
        if (ck->report)
                ck->report(ck->opaque, TOPICS_ERROR, ck->cfg->path, line, col, msg);
        return rc;
}

enum topics_rc topics_check(const struct config *cfg, enum topics_mode mode, int timeout_ms, topics_report_cb *report,
                            void *opaque, int64_t *dlq_max_bytes, char *err, size_t errsz)
{
        struct check ck = {.cfg = cfg, .report = report, .opaque = opaque, .err = err, .errsz = errsz};
        rd_kafka_t *rk = NULL;
        char why[512];
        int rc;

        if (errsz)
                err[0] = '\0';
        for (size_t i = 0; dlq_max_bytes && i < cfg->topic_cnt; i++)
                dlq_max_bytes[i] = -1;
        facts_init(&ck);
        if (!(rk = admin_client(&ck, why, sizeof(why)))) {
                char msg[600];
                int line, col;
                snprintf(msg, sizeof(msg), "cannot create a Kafka client: %s", why);
                bootstrap_pos(cfg, &line, &col);
                say(&ck, TOPICS_ERROR, line, col, msg);
                goto out;
        }
        if ((rc = describe(&ck, rk, TOPIC_UNKNOWN, timeout_ms, why, sizeof(why)))) {
                if (rc == TOPICS_UNREACHABLE) {
                        rc = unreachable(&ck, rk, timeout_ms, why);
                        rd_kafka_destroy(rk);
                        free(ck.facts);
                        return rc;
                }
                unanswered(&ck, why);
                goto out;
        }
        if (mode == TOPICS_CREATE_MISSING) {
                create_dlqs(&ck, rk, timeout_ms);
                if (describe(&ck, rk, TOPIC_UNKNOWN, timeout_ms, why, sizeof(why)))
                        log_warn("topics", "could not describe the created dead-letter topics: %s", why);
        }
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                const struct topic_conf *t = &cfg->topics[i];
                const struct facts *src = facts_of(&ck, t->name), *d = facts_of(&ck, t->dlq_topic);
                check_source(&ck, t, src);
                check_dlq(&ck, mode, t, d);
                check_retention(&ck, t, src);
                if (dlq_max_bytes && d->state == TOPIC_FOUND)
                        dlq_max_bytes[i] = d->max_bytes;
        }
out:
        if (rk)
                rd_kafka_destroy(rk);
        free(ck.facts);
        return ck.errors ? TOPICS_INVALID : TOPICS_OK;
}
