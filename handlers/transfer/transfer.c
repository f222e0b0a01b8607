/* transfer: the example handler — debit an account once per order (the seed's payment scenario). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <dedupd/handler.h>

struct transfer {
        const struct dedupd_host *host;
};

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

static int seed(const struct dedupd_host *host, struct dedupd_init_ctx *ictx, char *errbuf,
                size_t errsz);

static int transfer_init(const struct dedupd_host *host, struct dedupd_init_ctx *ictx, void **state,
                         char *errbuf, size_t errsz)
{
        struct transfer *t;
        PGconn *conn = host->init_conn(ictx);
        PGresult *r;

        /* Only what this handler calls must be there: a newer host has a
         * larger table, an older one may lack appended fields. */
        if (!DEDUPD_HOST_HAS(host, init_log) || !DEDUPD_HOST_HAS(host, set_response)) {
                snprintf(errbuf, errsz, "host API table too small (%u bytes)", host->size);
                return -1;
        }
        /* Run the DDL only when something is missing: CREATE ... IF NOT EXISTS
         * still queues for a lock on an existing table, and behind a stopped
         * instance's open transaction that would stall this start and, through
         * the lock queue, every other instance's inserts. */
        r = PQexec(conn, "SELECT to_regclass('account') IS NOT NULL AND to_regclass('transfer_ledger') IS NOT NULL"
                         " AND to_regclass('transfer_ledger_idem_key') IS NOT NULL");
        int ready = PQresultStatus(r) == PGRES_TUPLES_OK && !strcmp(PQgetvalue(r, 0, 0), "t");
        PQclear(r);
        if (ready)
                goto seed;
        /* Two instances may start at once: serialise the DDL. */
        r = PQexec(conn, "BEGIN; SELECT pg_advisory_xact_lock(hashtext('transfer.setup'));");
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
                snprintf(errbuf, errsz, "locking for setup: %s", PQerrorMessage(conn));
                PQclear(r);
                PQclear(PQexec(conn, "ROLLBACK"));
                return -1;
        }
        PQclear(r);
        r = PQexec(conn, setup_sql);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
                snprintf(errbuf, errsz, "creating tables: %s", PQerrorMessage(conn));
                PQclear(r);
                PQclear(PQexec(conn, "ROLLBACK"));
                return -1;
        }
        PQclear(r);
        r = PQexec(conn, "COMMIT");
        PQclear(r);
seed:
        if (seed(host, ictx, errbuf, errsz))
                return -1;
        t = calloc(1, sizeof(*t));
        if (!t) {
                snprintf(errbuf, errsz, "out of memory");
                return -1;
        }
        t->host = host;
        *state = t;
        host->init_log(ictx, DEDUPD_LOG_INFO, "ready: tables account and transfer_ledger");
        return 0;
}

/* Seed accounts from the handler config (demo and tests):
 *   config: { seed_accounts: 100, initial_balance: 1000 }
 * creates accounts 1..100 with 1000 each where missing. */
static int seed(const struct dedupd_host *host, struct dedupd_init_ctx *ictx, char *errbuf,
                size_t errsz)
{
        const char *n = host->config_get(ictx, "seed_accounts");
        const char *b = host->config_get(ictx, "initial_balance");
        PGconn *conn = host->init_conn(ictx);
        if (!n)
                return 0;
        const char *params[2] = {n, b ? b : "1000"};
        PGresult *r = PQexecParams(conn,
                                   /* NOT EXISTS first: existing rows are not touched, so a
                                    * row locked by a running batch does not stall a start. */
                                   "INSERT INTO account (user_id, balance)"
                                   " SELECT g, $2::bigint FROM generate_series(1, $1::bigint) g"
                                   " WHERE NOT EXISTS (SELECT 1 FROM account a WHERE a.user_id = g)"
                                   " ON CONFLICT (user_id) DO NOTHING",
                                   2, NULL, params, NULL, NULL, 0);
        int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        if (!ok)
                snprintf(errbuf, errsz, "seeding accounts (seed_accounts=%s, initial_balance=%s): %s", n,
                         params[1], PQerrorMessage(conn));
        else
                host->init_log(ictx, DEDUPD_LOG_INFO, "seeded %s new account(s) with balance %s",
                               PQcmdTuples(r), params[1]);
        PQclear(r);
        return ok ? 0 : -1;
}

/* {"order_id":"9527","user_id":1,"amount":10} -> 0, or -1 when malformed. */
static int parse(const struct dedupd_msg *msg, json_int_t *user_id, json_int_t *amount)
{
        json_error_t jerr;
        json_t *root = json_loadb(msg->value, msg->value_len, 0, &jerr);
        int rc = -1;
        if (root && !json_unpack(root, "{s:I, s:I}", "user_id", user_id, "amount", amount) &&
            *amount > 0)
                rc = 0;
        json_decref(root);
        return rc;
}

static dedupd_result_t reject(const struct dedupd_host *host, struct dedupd_ctx *ctx, const char *why)
{
        host->set_response(ctx, why, strlen(why));
        return DEDUPD_REJECT;
}

static dedupd_result_t apply(const struct dedupd_host *host, struct dedupd_ctx *ctx,
                             const struct dedupd_msg *msg, json_int_t user_id, json_int_t amount)
{
        PGconn *conn = host->conn(ctx);
        char uid[32], amt[32], resp[128];
        PGresult *r;

        snprintf(uid, sizeof(uid), "%" JSON_INTEGER_FORMAT, user_id);
        snprintf(amt, sizeof(amt), "%" JSON_INTEGER_FORMAT, amount);

        /* Conditional debit in one statement: no read-then-write race. */
        const char *p1[2] = {amt, uid};
        r = PQexecParams(conn,
                         "UPDATE account SET balance = balance - $1::bigint"
                         " WHERE user_id = $2::bigint AND balance >= $1::bigint",
                         2, NULL, p1, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
                host->log(ctx, DEDUPD_LOG_WARN, "debit failed: %s", PQerrorMessage(conn));
                PQclear(r);
                return DEDUPD_RETRY;
        }
        int updated = atoi(PQcmdTuples(r));
        PQclear(r);
        if (updated == 0)
                return reject(host, ctx, "insufficient balance");

        const char *p2[3] = {msg->idem_key, uid, amt};
        r = PQexecParams(conn,
                         "INSERT INTO transfer_ledger (idem_key, user_id, amount)"
                         " VALUES ($1, $2::bigint, $3::bigint)",
                         3, NULL, p2, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
                host->log(ctx, DEDUPD_LOG_WARN, "ledger insert failed: %s", PQerrorMessage(conn));
                PQclear(r);
                return DEDUPD_RETRY;
        }
        PQclear(r);
        int n = snprintf(resp, sizeof(resp), "OK: debited %s", amt);
        host->set_response(ctx, resp, (size_t)n);
        return DEDUPD_OK;
}

#define INVALID "invalid payment: need integer user_id and positive amount"

/* One message at a time (used when the host calls handle()). */
static dedupd_result_t transfer_handle(void *state, struct dedupd_ctx *ctx,
                                       const struct dedupd_msg *msg)
{
        struct transfer *t = state;
        json_int_t user_id, amount;
        if (parse(msg, &user_id, &amount))
                return reject(t->host, ctx, INVALID);
        return apply(t->host, ctx, msg, user_id, amount);
}

static int cmp_i64(const void *a, const void *b)
{
        json_int_t x = *(const json_int_t *)a, y = *(const json_int_t *)b;
        return x < y ? -1 : x > y;
}

/* The whole batch: lock every account it touches in user_id order first,
 * so two instances debiting overlapping accounts never deadlock. */
static dedupd_result_t transfer_handle_batch(void *state, struct dedupd_ctx *const *ctxs,
                                             const struct dedupd_msg *const *msgs, size_t cnt,
                                             dedupd_result_t *results)
{
        struct transfer *t = state;
        const struct dedupd_host *host = t->host;
        json_int_t *uids = calloc(cnt, sizeof(*uids)), *amts = calloc(cnt, sizeof(*amts));
        json_int_t *sorted = calloc(cnt, sizeof(*sorted));
        char *list = malloc(cnt * 24 + 3);
        size_t nu = 0, len = 0;
        dedupd_result_t ret = DEDUPD_OK;

        if (!uids || !amts || !sorted || !list) {
                ret = DEDUPD_RETRY;
                goto out;
        }
        for (size_t i = 0; i < cnt; i++) {
                results[i] = DEDUPD_OK;
                if (parse(msgs[i], &uids[i], &amts[i])) {
                        results[i] = reject(host, ctxs[i], INVALID);
                        continue;
                }
                sorted[nu++] = uids[i];
        }
        qsort(sorted, nu, sizeof(*sorted), cmp_i64);
        list[len++] = '{';
        for (size_t i = 0; i < nu; i++)
                if (i == 0 || sorted[i] != sorted[i - 1])
                        len += (size_t)sprintf(list + len, "%s%" JSON_INTEGER_FORMAT,
                                               len > 1 ? "," : "", sorted[i]);
        list[len++] = '}';
        list[len] = '\0';
        if (nu) {
                const char *p[1] = {list};
                PGconn *conn = host->conn(ctxs[0]);
                PGresult *r = PQexecParams(conn,
                                           "SELECT user_id FROM account WHERE user_id = ANY($1::bigint[])"
                                           " ORDER BY user_id FOR UPDATE",
                                           1, NULL, p, NULL, NULL, 0);
                if (PQresultStatus(r) != PGRES_TUPLES_OK) {
                        host->log(ctxs[0], DEDUPD_LOG_WARN, "locking accounts: %s", PQerrorMessage(conn));
                        ret = DEDUPD_RETRY;
                }
                PQclear(r);
        }
        for (size_t i = 0; i < cnt && ret == DEDUPD_OK; i++) {
                if (results[i] == DEDUPD_REJECT)
                        continue;
                results[i] = apply(host, ctxs[i], msgs[i], uids[i], amts[i]);
                if (results[i] == DEDUPD_RETRY)
                        ret = DEDUPD_RETRY;
        }
out:
        free(uids);
        free(amts);
        free(sorted);
        free(list);
        return ret;
}

static void transfer_fini(void *state) { free(state); }

static const struct dedupd_handler transfer = {
        DEDUPD_HANDLER_MAGIC,
        .name = "transfer",
        /* It rejects only when its conditional UPDATE changed nothing. */
        .flags = DEDUPD_HANDLER_F_CLEAN_REJECT,
        .init = transfer_init,
        .handle = transfer_handle,
        .handle_batch = transfer_handle_batch,
        .fini = transfer_fini,
        /* One ledger row per applied payment: dedupctl verify counts them. */
        .evidence_table = "transfer_ledger",
        .evidence_key_column = "idem_key",
};

DEDUPD_HANDLER_EXPORT(transfer)
