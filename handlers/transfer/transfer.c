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

/* ---- the whole batch in three statements ------------------------------------ */

/* A PostgreSQL array literal, grown as elements are added. */
struct arr {
        char *p;
        size_t len, cap;
        int n;
};

static int arr_add(struct arr *a, const char *v, int quote)
{
        size_t need = 2 * strlen(v) + 4;
        if (a->len + need + 2 > a->cap) {
                size_t cap = (a->cap ? a->cap * 2 : 256) + need;
                char *np = realloc(a->p, cap);
                if (!np)
                        return -1;
                a->p = np;
                a->cap = cap;
        }
        a->p[a->len++] = a->n++ ? ',' : '{';
        if (quote)
                a->p[a->len++] = '"';
        for (; *v; v++) {
                if (quote && (*v == '"' || *v == '\\'))
                        a->p[a->len++] = '\\';
                a->p[a->len++] = *v;
        }
        if (quote)
                a->p[a->len++] = '"';
        a->p[a->len] = '\0';
        return 0;
}

static int arr_int(struct arr *a, json_int_t v)
{
        char num[32];
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, v);
        return arr_add(a, num, 0);
}

static const char *arr_done(struct arr *a)
{
        if (!a->n)
                return "{}";
        strcpy(a->p + a->len, "}"); /* arr_add left room for it */
        return a->p;
}

/* An account the batch touches: its balance as locked, then as debited. */
struct account {
        json_int_t user_id, balance;
        int found, debited;
};

static int cmp_account(const void *a, const void *b)
{
        json_int_t x = ((const struct account *)a)->user_id, y = ((const struct account *)b)->user_id;
        return x < y ? -1 : x > y;
}

static struct account *find_account(struct account *acc, size_t n, json_int_t user_id)
{
        struct account key = {.user_id = user_id};
        return bsearch(&key, acc, n, sizeof(*acc), cmp_account);
}

struct batch {
        const struct dedupd_host *host;
        struct dedupd_ctx *const *ctxs;
        const struct dedupd_msg *const *msgs;
        size_t cnt;
        dedupd_result_t *results;
        json_int_t *uids, *amts;
        struct account *acc; /* distinct accounts, by user_id */
        size_t nacc;
};

/* Parse every message; the distinct accounts, sorted. */
static void batch_parse(struct batch *b)
{
        for (size_t i = 0; i < b->cnt; i++) {
                b->results[i] = DEDUPD_OK;
                if (parse(b->msgs[i], &b->uids[i], &b->amts[i])) {
                        b->results[i] = reject(b->host, b->ctxs[i], INVALID);
                        continue;
                }
                b->acc[b->nacc++] = (struct account){.user_id = b->uids[i]};
        }
        qsort(b->acc, b->nacc, sizeof(*b->acc), cmp_account);
        size_t k = 0;
        for (size_t i = 0; i < b->nacc; i++)
                if (!k || b->acc[i].user_id != b->acc[k - 1].user_id)
                        b->acc[k++] = b->acc[i];
        b->nacc = k;
}

/* 1. Lock every account of the batch in user_id order (two instances
 *    debiting overlapping accounts never deadlock) and read its balance. */
static int batch_lock(struct batch *b, PGconn *conn)
{
        struct arr ids = {0};
        int rc = -1;
        for (size_t i = 0; i < b->nacc; i++)
                if (arr_int(&ids, b->acc[i].user_id))
                        goto out;
        const char *p[1] = {arr_done(&ids)};
        PGresult *r = PQexecParams(conn,
                                   "SELECT user_id, balance FROM account WHERE user_id = ANY($1::bigint[])"
                                   " ORDER BY user_id FOR UPDATE",
                                   1, NULL, p, NULL, NULL, 0);
        if (PQresultStatus(r) == PGRES_TUPLES_OK) {
                for (int row = 0; row < PQntuples(r); row++) {
                        struct account *a = find_account(b->acc, b->nacc, strtoll(PQgetvalue(r, row, 0), NULL, 10));
                        if (a) {
                                a->balance = strtoll(PQgetvalue(r, row, 1), NULL, 10);
                                a->found = 1;
                        }
                }
                rc = 0;
        } else {
                b->host->log(b->ctxs[0], DEDUPD_LOG_WARN, "locking accounts: %s", PQerrorMessage(conn));
        }
        PQclear(r);
out:
        free(ids.p);
        return rc;
}

/* 2. In offset order, as if applied one after another: a debit that the
 *    balance left by the earlier ones covers is applied, the others rejected. */
static void batch_decide(struct batch *b)
{
        for (size_t i = 0; i < b->cnt; i++) {
                char resp[64];
                if (b->results[i] == DEDUPD_REJECT)
                        continue;
                struct account *a = find_account(b->acc, b->nacc, b->uids[i]);
                if (!a->found || a->balance < b->amts[i]) {
                        b->results[i] = reject(b->host, b->ctxs[i], "insufficient balance");
                        continue;
                }
                a->balance -= b->amts[i];
                a->debited = 1;
                int n = snprintf(resp, sizeof(resp), "OK: debited %" JSON_INTEGER_FORMAT, b->amts[i]);
                b->host->set_response(b->ctxs[i], resp, (size_t)n);
        }
}

static int exec_ok(struct batch *b, PGconn *conn, const char *what, const char *sql, int n, const char *const *p)
{
        PGresult *r = PQexecParams(conn, sql, n, NULL, p, NULL, NULL, 0);
        int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        if (!ok)
                b->host->log(b->ctxs[0], DEDUPD_LOG_WARN, "%s: %s", what, PQerrorMessage(conn));
        PQclear(r);
        return ok ? 0 : -1;
}

/* 3. The new balances of the debited accounts, and 4. one ledger row per
 *    applied payment: one statement each. */
static int batch_write(struct batch *b, PGconn *conn)
{
        struct arr u = {0}, bal = {0}, keys = {0}, lu = {0}, la = {0};
        int rc = -1;
        for (size_t i = 0; i < b->nacc; i++)
                if (b->acc[i].debited && (arr_int(&u, b->acc[i].user_id) || arr_int(&bal, b->acc[i].balance)))
                        goto out;
        for (size_t i = 0; i < b->cnt; i++)
                if (b->results[i] == DEDUPD_OK &&
                    (arr_add(&keys, b->msgs[i]->idem_key, 1) || arr_int(&lu, b->uids[i]) || arr_int(&la, b->amts[i])))
                        goto out;
        const char *p1[2] = {arr_done(&u), arr_done(&bal)};
        const char *p2[3] = {arr_done(&keys), arr_done(&lu), arr_done(&la)};
        if (!u.n || (!exec_ok(b, conn, "debit",
                              "UPDATE account a SET balance = d.balance"
                              " FROM unnest($1::bigint[], $2::bigint[]) AS d(user_id, balance)"
                              " WHERE a.user_id = d.user_id",
                              2, p1) &&
                     !exec_ok(b, conn, "ledger insert",
                              "INSERT INTO transfer_ledger (idem_key, user_id, amount)"
                              " SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])",
                              3, p2)))
                rc = 0;
out:
        free(u.p);
        free(bal.p);
        free(keys.p);
        free(lu.p);
        free(la.p);
        return rc;
}

/* The whole batch in a constant number of statements, with exactly the
 * outcome of applying the messages one after another in offset order. */
static dedupd_result_t transfer_handle_batch(void *state, struct dedupd_ctx *const *ctxs,
                                             const struct dedupd_msg *const *msgs, size_t cnt,
                                             dedupd_result_t *results)
{
        struct transfer *t = state;
        struct batch b = {t->host, ctxs, msgs, cnt, results, calloc(cnt, sizeof(json_int_t)),
                          calloc(cnt, sizeof(json_int_t)), calloc(cnt, sizeof(struct account)), 0};
        dedupd_result_t ret = DEDUPD_RETRY;

        if (!b.uids || !b.amts || !b.acc)
                goto out;
        batch_parse(&b);
        PGconn *conn = t->host->conn(ctxs[0]);
        if (b.nacc && batch_lock(&b, conn))
                goto out;
        batch_decide(&b);
        if (batch_write(&b, conn))
                goto out;
        ret = DEDUPD_OK;
out:
        free(b.uids);
        free(b.amts);
        free(b.acc);
        return ret;
}

static void transfer_fini(void *state) { free(state); }

static const struct dedupd_handler transfer = {
        DEDUPD_HANDLER_MAGIC,
        .name = "transfer",
        /* It rejects only when its conditional UPDATE changed nothing. */
        .flags = DEDUPD_HANDLER_F_CLEAN_REJECT | DEDUPD_HANDLER_F_CONCURRENT, /* its state: the host, read-only */
        .init = transfer_init,
        .handle = transfer_handle,
        .handle_batch = transfer_handle_batch,
        .fini = transfer_fini,
        /* One ledger row per applied payment: dedupctl verify counts them. */
        .evidence_table = "transfer_ledger",
        .evidence_key_column = "idem_key",
};

DEDUPD_HANDLER_EXPORT(transfer)
