/* check: what `dedupctl check` does with a loaded config — handlers, key lint, the listen address, the broker's side, the database. */
#include "tools/check.h"

#include <inttypes.h>
#include <stdint.h>

#include "base/hostport.h"
#include "base/lint.h"
#include "core/loader.h"
#include "ops/http.h"
#include "pg/replication.h"
#include "pg/key_buckets.h"
#include "pg/schema.h"
#include "pg/store.h"
#include "source/brokers.h"

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
                const char *version = loader_version(&h);
                fprintf(ck->o->out, "topic %s: key %s%s%s%s%s, handler %s%s%s (ABI %u), dead letters to %s\n", t->name,
                        t->key_subject, t->key_action ? "/" : "", t->key_action ? t->key_action : "",
                        t->key_request ? "/" : "", t->key_request ? t->key_request : "",
                        h.desc->name ? h.desc->name : "?", version ? " " : "", version ? version : "",
                        h.desc->abi_major, t->dlq_topic);
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

/* A broker that cannot redeliver what it acknowledged (RabbitMQ): said
 * unless commits wait for a synchronous standby. */
static void check_replication(struct check_ctx *ck, struct store *s)
{
        struct store_replication r;
        char err[512], why[256];
        if (!broker_of(ck->cfg)->acks_final)
                return;
        if (store_replication_read(s, &r, err, sizeof(err)) != STORE_OK) {
                fprintf(ck->o->err, "%s: warning: cannot read the database's replication settings: %s\n", ck->cfg->path,
                        err);
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

/* keys.layout: the namespace's keys in the table the claim will read. A
 * schema not yet migrated has none in the other. */
static enum check_rc check_layout(struct check_ctx *ck, struct store *s)
{
        char err[1024];
        int applied = 0, known = 0, other = 0;
        const char *layout = ck->cfg->keys_layout == LAYOUT_PARTITIONED ? "partitioned" : "heap";
        if (store_schema_version(s, &applied, &known, err, sizeof(err)) || applied < known)
                return CHECK_OK;
        if (store_keys_in_other_layout(s, ck->cfg->namespace, ck->cfg->keys_layout == LAYOUT_PARTITIONED, &other, err,
                                       sizeof(err))) {
                fprintf(ck->o->err, "%s: keys.layout: %s\n", ck->cfg->path, err);
                return CHECK_INVALID;
        }
        if (!other)
                return CHECK_OK;
        fprintf(ck->o->err,
                "%s: keys.layout is %s but namespace '%s' has keys in the other layout's table: dedupd would not "
                "find them, and every duplicate of them would run again; keep the layout, or start a new "
                "namespace\n",
                ck->cfg->path, layout, ck->cfg->namespace);
        return CHECK_INVALID;
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
        if (check_layout(ck, s) != CHECK_OK)
                rc = CHECK_INVALID;
        store_free(s);
        return rc;
}

/* The broker's side, as the broker checks it. */
static enum check_rc check_broker(struct check_ctx *ck)
{
        struct broker_report rep = {ck->o->out, ck->o->err, ck->cfg->path, 0, ck->o->broker_timeout_ms};
        enum broker_check rc = broker_of(ck->cfg)->check(ck->cfg, &rep);
        ck->warnings += rep.warnings;
        return rc == BROKER_CHECK_UNREACHABLE ? CHECK_UNREACHABLE
               : rc == BROKER_CHECK_INVALID   ? CHECK_INVALID
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
