/* message: the transfer handler one message at a time — a conditional debit, then its ledger row. */
#include "transfer.h"

#include <stdio.h>

dedupd_result_t transfer_handle(void *state, struct dedupd_ctx *ctx, const struct dedupd_msg *msg)
{
        const struct dedupd_host *host = DEDUPD_HOST(ctx);
        json_int_t user_id, amount;
        char uid[32], amt[32];
        struct dedupd_rows *debited;
        int rc;

        (void)state;
        if (transfer_parse(msg, &user_id, &amount))
                return transfer_reject(ctx, TRANSFER_INVALID);
        snprintf(uid, sizeof(uid), "%" JSON_INTEGER_FORMAT, user_id);
        snprintf(amt, sizeof(amt), "%" JSON_INTEGER_FORMAT, amount);

        /* Conditional debit in one statement: no read-then-write race. */
        const char *p1[2] = {amt, uid};
        if ((rc = host->exec(ctx,
                             "UPDATE account SET balance = balance - $1::bigint"
                             " WHERE user_id = $2::bigint AND balance >= $1::bigint",
                             2, p1, &debited)))
                return rc; /* logged by the host, with its SQLSTATE */
        if (host->rows(debited) == 0)
                return transfer_reject(ctx, TRANSFER_UNCOVERED);

        const char *p2[3] = {msg->idem_key, uid, amt};
        if ((rc = host->exec(
                     ctx, "INSERT INTO transfer_ledger (idem_key, user_id, amount) VALUES ($1, $2::bigint, $3::bigint)",
                     3, p2, NULL)))
                return rc;
        transfer_debited(ctx, amount);
        return DEDUPD_OK;
}
