/* hello: the seed's handler. {"order_id":"9527","user_id":1,"amount":10} debits once per order, or is rejected. */
#include <stdlib.h>
#include <string.h>
#include <dedupd/handler.h>
static const char schema[] = "CREATE TABLE hello_account (user_id bigint PRIMARY KEY, balance bigint);"
                             "CREATE TABLE hello_ledger (idem_key text NOT NULL, user_id bigint, amount bigint);";
static const char pay[] = "WITH p AS (SELECT ($2::jsonb->>'user_id')::bigint u, ($2::jsonb->>'amount')::bigint a),"
                          " d AS (UPDATE hello_account SET balance = balance - a FROM p"
                          " WHERE user_id = u AND a > 0 AND balance >= a RETURNING u, a)"
                          " INSERT INTO hello_ledger SELECT $1, u, a FROM d RETURNING 'OK: debited ' || amount";

static int hello_init(const struct dedupd_host *host, struct dedupd_init_ctx *ictx, void **state, char *err, size_t n)
{
        DEDUPD_HOST_REQUIRE(host, set_evidence, err, n);
        *state = NULL; /* nothing kept between calls: safe on several workers (F_CONCURRENT) */
        return host->ensure_schema(ictx, "hello", schema, "SELECT to_regclass('hello_ledger') IS NOT NULL") ||
               host->set_evidence(ictx, "hello_ledger", "idem_key"); /* one row per payment: what verify counts */
}

static dedupd_result_t hello_handle(void *state, struct dedupd_ctx *ctx, const struct dedupd_msg *msg)
{
        const struct dedupd_host *host = DEDUPD_HOST(ctx);
        struct dedupd_rows *rows;
        char *payload = strndup(msg->value ? msg->value : "", msg->value_len);
        const char *params[2] = {msg->idem_key, payload}, *reply;
        int rc = host->exec(ctx, pay, 2, params, &rows);
        (void)state;
        free(payload);
        if (rc != DEDUPD_EXEC_OK) /* logged with its SQLSTATE: RETRY, or this message rejected or failed */
                return rc;
        reply = host->rows(rows) ? host->value(rows, 0, 0) : "insufficient balance"; /* no row: not covered */
        host->set_response(ctx, reply, strlen(reply));
        return host->rows(rows) ? DEDUPD_OK : DEDUPD_REJECT;
}
static const struct dedupd_handler hello = {
        DEDUPD_HANDLER_MAGIC,   .name = "hello",
        .version = "1.0",       .init = hello_init,
        .handle = hello_handle, .flags = DEDUPD_HANDLER_F_CLEAN_REJECT | DEDUPD_HANDLER_F_CONCURRENT};
DEDUPD_HANDLER_EXPORT(hello)
