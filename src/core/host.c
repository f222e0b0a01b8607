/* host: the versioned host-API table handed to handlers, and the contexts behind it. */
#include "core/host.h"

#include "base/mem.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/log.h"
#include "base/utf8.h"
#include "core/source.h"
#include "ops/metrics.h"
#include "pg/evidence.h"
#include "pg/handler_exec.h"
#include "pg/handler_schema.h"
#include "pg/outbox.h"

static const char *host_idem_key(struct dedupd_ctx *ctx) { return ctx->idem_key; }

static int host_set_response(struct dedupd_ctx *ctx, const char *data, size_t len)
{
        char *copy;
        if (!data) {
                free(ctx->response);
                ctx->response = NULL;
                ctx->response_len = 0;
                return 0;
        }
        /* Stored as PostgreSQL text: cut at an embedded NUL rather than fail;
         * what is not UTF-8 would fail the batch's statement: refused here. */
        const char *nul = memchr(data, '\0', len);
        if (nul)
                len = (size_t)(nul - data);
        if (!utf8_text_ok(data, len)) {
                log_warn(ctx->log_prefix,
                         "set_response for key %s: the response is not UTF-8 text: refused, "
                         "the response stays as it was (a response is stored as text)",
                         ctx->idem_key);
                ctx->refused_responses++;
                return -1;
        }
        copy = xmalloc(len + 1);
        memcpy(copy, data, len);
        copy[len] = '\0';
        free(ctx->response);
        ctx->response = copy;
        ctx->response_len = len;
        return 0;
}

static int clamp_level(int level)
{
        if (level <= DEDUPD_LOG_ERROR)
                return LOG_ERROR;
        if (level >= DEDUPD_LOG_DEBUG)
                return LOG_DEBUG;
        return level;
}

static void host_log(struct dedupd_ctx *ctx, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void host_log(struct dedupd_ctx *ctx, int level, const char *fmt, ...)
{
        va_list ap;
        level = clamp_level(level);
        if (level > log_level_current)
                return;
        va_start(ap, fmt);
        log_vwrite(level, ctx->log_prefix, fmt, ap);
        va_end(ap);
}

static const char *host_config_get(struct dedupd_init_ctx *ictx, const char *path)
{
        return config_tree_get(ictx->config, path);
}

static void host_init_log(struct dedupd_init_ctx *ictx, int level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void host_init_log(struct dedupd_init_ctx *ictx, int level, const char *fmt, ...)
{
        va_list ap;
        level = clamp_level(level);
        if (level > log_level_current)
                return;
        va_start(ap, fmt);
        log_vwrite(level, ictx->log_prefix, fmt, ap);
        va_end(ap);
}

/* What the outbox could not store or the broker never take is refused
 * before it is written: a failed INSERT would abort the handler's
 * transaction, and a row no broker takes would never leave the outbox. */
static int emit_refused(struct dedupd_ctx *ctx, const struct record *rec)
{
        char why[512];
        const char *no = NULL;
        if (!utf8_text_ok(rec->topic, strlen(rec->topic)))
                no = "the topic is not UTF-8 text";
        for (size_t i = 0; !no && i < rec->header_cnt; i++)
                if (!rec->headers[i].name || !utf8_text_ok(rec->headers[i].name, strlen(rec->headers[i].name)))
                        no = "a header name is missing or not UTF-8 text";
        if (!no && ctx->sink && ctx->sink->check && ctx->sink->check(ctx->sink->opaque, rec, why, sizeof(why)))
                no = why;
        if (!no)
                return 0;
        log_warn(ctx->log_prefix, "emit for key %s refused: %s", ctx->idem_key, no);
        ctx->refused_emits++;
        return 1;
}

static int host_emit(struct dedupd_ctx *ctx, const char *topic, const void *key, size_t key_len, const void *value,
                     size_t value_len, const struct dedupd_header *headers, size_t header_cnt)
{
        char err[512];
        if (!ctx->ns || !topic || !*topic) {
                log_error(ctx->log_prefix, "emit: %s",
                          !ctx->ns ? "not available in external mode "
                                     "(there is no transaction to join)"
                                   : "no topic");
                return -1;
        }
        /* Its place: emit number ctx->emitted (0, 1, ...) of this message, in call order. */
        const struct outbox_msg m = {ctx->idem_key,
                                     {.slot = MSGID_EMIT, .ordinal = ctx->emitted},
                                     {topic, key, key_len, value, value_len, headers, header_cnt, NULL, 0, NULL}};
        if (emit_refused(ctx, &m.rec))
                return -1;
        if (store_outbox_insert(ctx->head.store, ctx->ns, &m, err, sizeof(err))) {
                log_warn(ctx->log_prefix, "emit to %s: %s", topic, err);
                return -1;
        }
        ctx->emitted++;
        return 0;
}

/* A statement's failure, said once, as the handler ABI names it. */
static int exec_verdict(const char *prefix, const char *key, enum store_handler_rc rc, const char *why)
{
        static const struct {
                int level, result;
                const char *means;
        } v[] = {
                [STORE_HANDLER_OK] = {LOG_DEBUG, DEDUPD_EXEC_OK, ""},
                [STORE_HANDLER_TRANSIENT] = {LOG_WARN, DEDUPD_EXEC_RETRY, "transient: retried"},
                [STORE_HANDLER_CONSTRAINT] = {LOG_INFO, DEDUPD_EXEC_REJECT, "a constraint: rejected"},
                [STORE_HANDLER_FATAL] = {LOG_ERROR, DEDUPD_EXEC_FATAL, "fatal: an attempt of the message"},
        };
        if (rc != STORE_HANDLER_OK && v[rc].level <= log_level_current)
                log_write(v[rc].level, prefix, "%s%s%sstatement failed (%s): %s", key ? "key " : "", key ? key : "",
                          key ? ": " : "", why, v[rc].means);
        return v[rc].result;
}

/* A rejection by a constraint: the response exec promises ("rejected: constraint NAME"). */
static void constraint_response(struct dedupd_ctx *ctx, const char *constraint)
{
        char *resp = xasprintf("rejected: constraint %s", constraint ? constraint : "(unnamed)");
        host_set_response(ctx, resp, strlen(resp));
        free(resp);
}

static int host_exec(struct dedupd_ctx *ctx, const char *sql, int nparams, const char *const *params,
                     struct dedupd_rows **rows)
{
        char why[512] = "";
        struct dedupd_rows *r = NULL;
        enum store_handler_rc rc = store_handler_exec(&ctx->head, sql, nparams, params, &r, why, sizeof(why));
        if (rows)
                *rows = r;
        if (rc == STORE_HANDLER_CONSTRAINT)
                constraint_response(ctx, store_handler_constraint(r));
        return exec_verdict(ctx->log_prefix, ctx->idem_key, rc, why);
}

static int host_classify(struct dedupd_ctx *ctx, const store_result *res)
{
        char why[512] = "";
        const char *constraint;
        enum store_handler_rc rc = store_handler_judge(&ctx->head, res, &constraint, why, sizeof(why));
        if (rc == STORE_HANDLER_CONSTRAINT)
                constraint_response(ctx, constraint);
        return exec_verdict(ctx->log_prefix, ctx->idem_key, rc, why);
}

static int host_init_exec(struct dedupd_init_ctx *ictx, const char *sql, int nparams, const char *const *params,
                          struct dedupd_rows **rows)
{
        char why[512] = "";
        enum store_handler_rc rc = store_handler_exec(&ictx->head, sql, nparams, params, rows, why, sizeof(why));
        if (rc != STORE_HANDLER_OK)
                snprintf(ictx->error, sizeof(ictx->error), "a statement failed (%s)", why);
        return exec_verdict(ictx->log_prefix, NULL, rc, why);
}

/* A failed init-time call: logged, and kept as init()'s message. */
static int init_failed(struct dedupd_init_ctx *ictx, const char *what, const char *why)
{
        snprintf(ictx->error, sizeof(ictx->error), "%s: %s", what, why);
        log_error(ictx->log_prefix, "%s", ictx->error);
        return -1;
}

static int host_ensure_schema(struct dedupd_init_ctx *ictx, const char *name, const char *ddl, const char *probe)
{
        char err[512];
        if (store_handler_ensure_schema(ictx->head.store, name, ddl, probe, err, sizeof(err)))
                return init_failed(ictx, name ? name : "ensure_schema", err);
        return 0;
}

static int host_set_evidence(struct dedupd_init_ctx *ictx, const char *table, const char *key_column)
{
        char err[512];
        const char *column = key_column ? key_column : "idem_key";
        if (store_evidence_names_ok(table, column, err, sizeof(err)))
                return init_failed(ictx, "set_evidence", err);
        if (!ictx->head.store || !ictx->topic)
                return init_failed(ictx, "set_evidence", "no database to record it in");
        if (store_evidence_declare(ictx->head.store, ictx->ns, ictx->topic, ictx->handler, table, column, err,
                                   sizeof(err)))
                return init_failed(ictx, "set_evidence", err);
        log_info(ictx->log_prefix, "topic %s: dedupctl verify counts its effects in %s(%s)", ictx->topic, table,
                 column);
        return 0;
}

const struct dedupd_host host_api = {
        .abi_major = DEDUPD_HANDLER_ABI_MAJOR,
        .size = sizeof(struct dedupd_host),
        .conn = store_handler_conn,
        .idem_key = host_idem_key,
        .set_response = host_set_response,
        .log = host_log,
        .config_get = host_config_get,
        .init_conn = store_handler_init_conn,
        .init_log = host_init_log,
        .emit = host_emit,
        .exec = host_exec,
        .rows = store_handler_rows,
        .value = store_handler_value,
        .constraint = store_handler_constraint,
        .init_exec = host_init_exec,
        .ensure_schema = host_ensure_schema,
        .set_evidence = host_set_evidence,
        .classify = host_classify,
};

void host_ctx_release(struct store_handler_ctx *head) { store_handler_release(head); }

void host_count_refusals(const struct dedupd_ctx *ctx)
{
        metrics_handler_refusals("set_response", (uint64_t)ctx->refused_responses);
        metrics_handler_refusals("emit", (uint64_t)ctx->refused_emits);
}

void host_ctx_reset(struct dedupd_ctx *ctx)
{
        free(ctx->response);
        ctx->response = NULL;
        ctx->response_len = 0;
}
