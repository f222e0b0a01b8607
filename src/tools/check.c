/* check: what `dedupctl check` does with a loaded config — handlers, key lint, the listen address, the broker's side, the database. */
#include "tools/check.h"

#include <inttypes.h>
#include <stdint.h>

#include "base/hostport.h"
#include "base/lint.h"
#include "core/loader.h"
#include "ops/http.h"
#include "pg/replication.h"
#include "pg/store.h"
#include "source/kafka/topics.h"
#include "source/nats/consumers.h"
#include "source/nats/link.h"
#include "source/rabbitmq/queues.h"

/* What check found besides errors. */
struct check_ctx {
        const struct config *cfg;
        const struct check_opts *o;
        int warnings;
};

static void on_lint(void *opaque, const struct topic_conf *t, const struct lint_finding *f)
{
        struct check_ctx *ck = opaque;
        ck->warnings += f->severity == LINT_WARN;
        fprintf(ck->o->err, "%s:%d:%d: %stopic '%s': %s\n", ck->cfg->path, t->line, t->col,
                f->severity == LINT_WARN ? "warning: " : "", t->name, f->message);
}

static void on_topics(void *opaque, enum topics_severity sev, const char *file, int line, int col, const char *msg)
{
        struct check_ctx *ck = opaque;
        ck->warnings += sev == TOPICS_WARN;
        fprintf(ck->o->err, "%s:%d:%d: %s%s\n", file, line, col, sev == TOPICS_WARN ? "warning: " : "", msg);
}

/* Each topic's handler loads and has the ABI this build speaks. */
static enum check_rc check_handlers(struct check_ctx *ck)
{
        const struct config *cfg = ck->cfg;
        enum check_rc rc = CHECK_OK;
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                const struct topic_conf *t = &cfg->topics[i];
                struct handler h;
                char err[1024];
                if (loader_open(&h, t->handler_path, err, sizeof(err))) {
                        fprintf(ck->o->err, "%s:%d:%d: %s\n", cfg->path, t->line, t->col, err);
                        rc = CHECK_INVALID;
                        continue;
                }
                fprintf(ck->o->out, "topic %s: key %s%s%s%s%s, handler %s (ABI %u), dead letters to %s\n", t->name,
                        t->key_subject, t->key_action ? "/" : "", t->key_action ? t->key_action : "",
                        t->key_request ? "/" : "", t->key_request ? t->key_request : "",
                        h.desc->name ? h.desc->name : "?", h.desc->abi_major, t->dlq_topic);
                loader_close(&h);
        }
        return rc;
}

/* The endpoints answer anyone who reaches them: said unless only this host can. */
static void check_listen(struct check_ctx *ck)
{
        const char *l = ck->cfg->http_listen;
        if (!*l || hostport_loopback(l))
                return;
        ck->warnings++;
        fprintf(ck->o->err, "%s: warning: http.listen %s is not a loopback address: %s\n", ck->cfg->path, l,
                HTTP_EXPOSED_WARNING);
}

/* RabbitMQ: every queue and the dead-letter exchange exist; where dead
 * letters go without one. */
static enum check_rc check_queues(struct check_ctx *ck)
{
        const struct config *cfg = ck->cfg;
        char err[1024];
        enum rmq_check_rc rc = rmq_queues_check(cfg, 0, err, sizeof(err));
        if (rc != RMQ_CHECK_OK) {
                fprintf(ck->o->err, "%s: %s%s\n", cfg->path, rc == RMQ_CHECK_UNREACHABLE ? "RabbitMQ: " : "", err);
                return rc == RMQ_CHECK_INVALID ? CHECK_INVALID : CHECK_UNREACHABLE;
        }
        fprintf(ck->o->out, "RabbitMQ: every queue exists%s\n", *cfg->rmq_dlx ? ", and the dead-letter exchange" : "");
        if (!*cfg->rmq_dlx) {
                ck->warnings++;
                fprintf(ck->o->err,
                        "%s: warning: rabbitmq.dead_letter.exchange is not set: unkeyable messages are rejected to "
                        "each queue's own x-dead-letter-exchange, without reason headers (dropped where a queue "
                        "has none)\n",
                        cfg->path);
        }
        return CHECK_OK;
}

/* RabbitMQ cannot redeliver what it acknowledged: said unless commits wait for a synchronous standby. */
static void check_replication(struct check_ctx *ck, struct store *s)
{
        struct store_replication r;
        char err[512], why[256];
        if (ck->cfg->source != SOURCE_RABBITMQ)
                return;
        if (store_replication_read(s, &r, err, sizeof(err)) != STORE_OK) {
                fprintf(ck->o->err, "%s: warning: cannot read the database's replication settings: %s\n",
                        ck->cfg->path, err);
                ck->warnings++;
                return;
        }
        if (replication_sync(&r, why, sizeof(why))) {
                fprintf(ck->o->out, "database %s: commits wait for a synchronous standby (%s)\n", store_target(s),
                        r.synchronous_standby_names);
                return;
        }
        ck->warnings++;
        fprintf(ck->o->err, "%s: warning: database %s: %s: %s\n", ck->cfg->path, store_target(s), why,
                REPLICATION_ADVICE);
}

/* Behind a pooler: said, and a pooler that cannot hold a transaction
 * (PgBouncer's pool_mode = statement) refused — every batch is one. */
static enum check_rc check_pooler(struct check_ctx *ck, struct store *s)
{
        char err[1024];
        enum store_rc rc = store_begin(s, err, sizeof(err));
        if (rc == STORE_OK)
                rc = store_exec(s, "SELECT 1", err, sizeof(err));
        if (rc == STORE_OK)
                rc = store_commit(s, err, sizeof(err));
        if (rc != STORE_OK) {
                fprintf(ck->o->err,
                        "%s: database %s: a transaction of two statements fails through the connection pooler (%s): "
                        "dedupd runs each batch as one transaction and needs session or transaction pooling "
                        "(PgBouncer: pool_mode = session or transaction, not statement)\n",
                        ck->cfg->path, store_target(s), err);
                return CHECK_INVALID;
        }
        fprintf(ck->o->out,
                "database %s: behind a connection pooler: nothing of dedupd's outlives a transaction; a handler "
                "must keep its state to its transactions too (no named prepared statements, SET LOCAL)\n",
                store_target(s));
        return CHECK_OK;
}

/* Whether the database answers, as dedupd will reach it (connect_timeout and all). */
static enum check_rc check_database(struct check_ctx *ck)
{
        char err[1200];
        struct store *s = store_open(ck->cfg->pg_conninfo, err, sizeof(err));
        if (!s) {
                fprintf(ck->o->err, "%s: %s\n", ck->cfg->path, err);
                return CHECK_UNREACHABLE;
        }
        fprintf(ck->o->out, "database %s: connected\n", store_target(s));
        check_replication(ck, s);
        enum check_rc rc = store_pooled(s) ? check_pooler(ck, s) : CHECK_OK;
        store_free(s);
        return rc;
}

/* source: nats — the server answers and holds the stream. */
static enum check_rc check_nats(struct check_ctx *ck)
{
        const struct config *cfg = ck->cfg;
        struct nats_link l;
        char err[1200];
        uint64_t last = 0;
        if (nats_link_open(&l, cfg, err, sizeof(err))) {
                fprintf(ck->o->err, "%s: %s\n", cfg->path, err);
                return CHECK_UNREACHABLE;
        }
        enum nats_check_rc c = nats_stream_check(&l, cfg, &last, err, sizeof(err));
        if (c == NATS_CHECK_OK)
                fprintf(ck->o->out, "stream %s on %s: exists, last sequence %" PRIu64 "\n", cfg->nats_stream,
                        l.server, last);
        else
                fprintf(ck->o->err, "%s: %s\n", cfg->path, err);
        nats_link_close(&l);
        return c == NATS_CHECK_OK ? CHECK_OK : c == NATS_CHECK_FAILED ? CHECK_INVALID : CHECK_UNREACHABLE;
}

/* The broker's side: Kafka's topics, the NATS stream, or the RabbitMQ queues. */
static enum check_rc check_broker(struct check_ctx *ck)
{
        char rerr[1024];
        if (ck->cfg->source == SOURCE_NATS)
                return check_nats(ck);
        if (ck->cfg->source == SOURCE_RABBITMQ)
                return check_queues(ck);
        enum topics_rc t = topics_check(ck->cfg, TOPICS_CHECK_ONLY, ck->o->broker_timeout_ms, on_topics, ck, NULL,
                                        rerr, sizeof(rerr));
        return t == TOPICS_UNREACHABLE || t == TOPICS_REFUSED ? CHECK_UNREACHABLE
               : t == TOPICS_INVALID                          ? CHECK_INVALID
                                                              : CHECK_OK;
}

enum check_rc check_run(const struct config *cfg, const struct check_opts *o)
{
        struct check_ctx ck = {cfg, o, 0};
        int bad = 0;
        if (o->print)
                config_dump(cfg, o->out);
        bad |= check_handlers(&ck) != CHECK_OK;
        /* Lint warnings leave the exit code 0. */
        bad |= lint_config(cfg, on_lint, &ck) != 0;
        check_listen(&ck);
        if (!o->offline) {
                enum check_rc b = check_broker(&ck);
                bad |= b == CHECK_INVALID;
                enum check_rc d = check_database(&ck);
                bad |= d == CHECK_INVALID;
                /* Unreachable: exit 2, as every dedupctl command, whatever else was found. */
                if (d == CHECK_UNREACHABLE || b == CHECK_UNREACHABLE)
                        return CHECK_UNREACHABLE;
        }
        if (bad)
                return CHECK_INVALID;
        fprintf(o->out, "%s: OK (namespace %s, %zu topic(s)", cfg->path, cfg->namespace, cfg->topic_cnt);
        if (ck.warnings)
                fprintf(o->out, ", %d warning(s)", ck.warnings);
        fprintf(o->out, ")\n");
        return CHECK_OK;
}
