/* transfer: the example handler — debit an account once per order (the seed's payment scenario): its setup, its descriptor and what its halves share. */
#include "transfer.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *const setup_sql =
        "CREATE TABLE IF NOT EXISTS account ("
        "  user_id bigint PRIMARY KEY,"
        "  balance bigint NOT NULL);"
        /* Deliberately no unique index on idem_key: this table is the
         * evidence that each effect happened exactly once. */
        "CREATE TABLE IF NOT EXISTS transfer_ledger ("
        "  id bigserial PRIMARY KEY,"
        "  idem_key text NOT NULL,"
        "  user_id bigint NOT NULL,"
        "  amount bigint NOT NULL,"
        "  applied_at timestamptz NOT NULL DEFAULT now());"
        "CREATE INDEX IF NOT EXISTS transfer_ledger_idem_key ON transfer_ledger (idem_key);";

static const char *const setup_probe =
        "SELECT to_regclass('account') IS NOT NULL AND to_regclass('transfer_ledger') IS NOT NULL"
        " AND to_regclass('transfer_ledger_idem_key') IS NOT NULL";

/* Seed accounts from the handler config (demo and tests):
 *   config: { seed_accounts: 100, initial_balance: 1000 }
 * creates accounts 1..100 with 1000 each where missing. */
static int seed(const struct dedupd_host *host, struct dedupd_init_ctx *ictx)
{
        const char *n = host->config_get(ictx, "seed_accounts");
        const char *b = host->config_get(ictx, "initial_balance");
        struct dedupd_rows *rows;
        if (!n)
                return 0;
        const char *params[2] = {n, b ? b : "1000"};
        /* NOT EXISTS first: existing rows are not touched, so a row locked by
         * a running batch does not stall a start. */
        if (host->init_exec(ictx,
                            "INSERT INTO account (user_id, balance)"
                            " SELECT g, $2::bigint FROM generate_series(1, $1::bigint) g"
                            " WHERE NOT EXISTS (SELECT 1 FROM account a WHERE a.user_id = g)"
                            " ON CONFLICT (user_id) DO NOTHING",
                            2, params, &rows))
                return -1; /* the host's reason (it names the SQLSTATE) is init()'s message */
        host->init_log(ictx, DEDUPD_LOG_INFO, "seeded %d new account(s) with balance %s", host->rows(rows), params[1]);
        return 0;
}

static int transfer_init(const struct dedupd_host *host, struct dedupd_init_ctx *ictx, void **state, char *errbuf,
                         size_t errsz)
{
        DEDUPD_HOST_REQUIRE(host, set_evidence, errbuf, errsz);
        *state = NULL; /* nothing: the host is reached from each context */
        /* One ledger row per applied payment: dedupctl verify counts them. */
        if (host->ensure_schema(ictx, "transfer", setup_sql, setup_probe) || seed(host, ictx) ||
            host->set_evidence(ictx, "transfer_ledger", "idem_key"))
                return -1;
        host->init_log(ictx, DEDUPD_LOG_INFO, "ready: tables account and transfer_ledger");
        return 0;
}

int transfer_parse(const struct dedupd_msg *msg, json_int_t *user_id, json_int_t *amount)
{
        json_error_t jerr;
        json_t *root = json_loadb(msg->value, msg->value_len, 0, &jerr);
        int rc = -1;
        if (root && !json_unpack(root, "{s:I, s:I}", "user_id", user_id, "amount", amount) && *amount > 0)
                rc = 0;
        json_decref(root);
        return rc;
}

dedupd_result_t transfer_reject(struct dedupd_ctx *ctx, const char *why)
{
        DEDUPD_HOST(ctx)->set_response(ctx, why, strlen(why));
        return DEDUPD_REJECT;
}

void transfer_debited(struct dedupd_ctx *ctx, json_int_t amount)
{
        char resp[64];
        int n = snprintf(resp, sizeof(resp), "OK: debited %" JSON_INTEGER_FORMAT, amount);
        DEDUPD_HOST(ctx)->set_response(ctx, resp, (size_t)n);
}

static const struct dedupd_handler transfer = {
        DEDUPD_HANDLER_MAGIC,
        .name = "transfer",
        .version = "1.1",
        /* It rejects only when its conditional UPDATE changed nothing; it
         * keeps no state at all. */
        .flags = DEDUPD_HANDLER_F_CLEAN_REJECT | DEDUPD_HANDLER_F_CONCURRENT,
        .init = transfer_init,
        .handle = transfer_handle,
        .handle_batch = transfer_handle_batch,
};

DEDUPD_HANDLER_EXPORT(transfer)
