/* hello: the seed's handler — debit a balance once per order (order_id + "PAY"), reject what it cannot cover. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dedupd/handler.h>

static int hello_init(const struct dedupd_host *host, struct dedupd_init_ctx *ictx, void **state, char *err, size_t n)
{
        DEDUPD_HOST_REQUIRE(host, set_evidence, err, n);
        *state = NULL; /* nothing kept between calls: safe on several workers (F_CONCURRENT) */
        return host->ensure_schema(ictx, "hello",
                                   "CREATE TABLE hello_account (user_id bigint PRIMARY KEY, balance bigint);"
                                   "CREATE TABLE hello_ledger (idem_key text NOT NULL, user_id bigint, amount bigint);",
                                   "SELECT to_regclass('hello_ledger') IS NOT NULL") ||
               host->set_evidence(ictx, "hello_ledger", "idem_key"); /* one row per payment: what verify counts */
}

/* {"order_id":"9527","user_id":1,"amount":10}: one statement debits and records the payment, or changes nothing. */
static dedupd_result_t hello_handle(void *state, struct dedupd_ctx *ctx, const struct dedupd_msg *msg)
{
        const struct dedupd_host *host = DEDUPD_HOST(ctx);
        struct dedupd_rows *rows;
        char *payload = strndup(msg->value ? msg->value : "", msg->value_len), resp[64];
        const char *params[2] = {msg->idem_key, payload};
        int rc = host->exec(
                ctx,
                "WITH p AS (SELECT ($2::jsonb->>'user_id')::bigint u, ($2::jsonb->>'amount')::bigint a),"
                " d AS (UPDATE hello_account SET balance = balance - a FROM p WHERE user_id = u AND a > 0"
                " AND balance >= a RETURNING u, a) INSERT INTO hello_ledger SELECT $1, u, a FROM d RETURNING amount",
                2, params, &rows);
        free(payload);
        if (rc != DEDUPD_EXEC_OK || host->rows(rows) == 0) /* failed (logged with its SQLSTATE), or not covered */
                return rc ? rc : (host->set_response(ctx, "insufficient balance", 20), DEDUPD_REJECT);
        snprintf(resp, sizeof(resp), "OK: debited %s", host->value(rows, 0, 0));
        host->set_response(ctx, resp, strlen(resp));
        return (void)state, DEDUPD_OK;
}
static const struct dedupd_handler hello = {
        DEDUPD_HANDLER_MAGIC,
        .name = "hello",
        .version = "1.0",
        .init = hello_init,
        .handle = hello_handle,
        .flags = DEDUPD_HANDLER_F_CLEAN_REJECT | DEDUPD_HANDLER_F_CONCURRENT, /* a reject changed nothing */
};
DEDUPD_HANDLER_EXPORT(hello)
