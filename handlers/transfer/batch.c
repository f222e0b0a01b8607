/* batch: the transfer handler over a whole batch in three statements — lock the accounts, decide in offset order, write the balances and the ledger. */
#include "transfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        struct dedupd_ctx *const *ctxs; /* the batch's statements run on ctxs[0]: one transaction */
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
                if (transfer_parse(b->msgs[i], &b->uids[i], &b->amts[i])) {
                        b->results[i] = transfer_reject(b->ctxs[i], TRANSFER_INVALID);
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
static int batch_lock(struct batch *b)
{
        struct arr ids = {0};
        struct dedupd_rows *r;
        int rc = -1;
        for (size_t i = 0; i < b->nacc; i++)
                if (arr_int(&ids, b->acc[i].user_id))
                        goto out;
        const char *p[1] = {arr_done(&ids)};
        if (b->host->exec(b->ctxs[0],
                          "SELECT user_id, balance FROM account WHERE user_id = ANY($1::bigint[])"
                          " ORDER BY user_id FOR UPDATE",
                          1, p, &r))
                goto out;
        for (int row = 0; row < b->host->rows(r); row++) {
                struct account *a = find_account(b->acc, b->nacc, strtoll(b->host->value(r, row, 0), NULL, 10));
                if (a) {
                        a->balance = strtoll(b->host->value(r, row, 1), NULL, 10);
                        a->found = 1;
                }
        }
        rc = 0;
out:
        free(ids.p);
        return rc;
}

/* 2. In offset order, as if applied one after another: a debit that the
 *    balance left by the earlier ones covers is applied, the others rejected. */
static void batch_decide(struct batch *b)
{
        for (size_t i = 0; i < b->cnt; i++) {
                if (b->results[i] == DEDUPD_REJECT)
                        continue;
                struct account *a = find_account(b->acc, b->nacc, b->uids[i]);
                if (!a->found || a->balance < b->amts[i]) {
                        b->results[i] = transfer_reject(b->ctxs[i], TRANSFER_UNCOVERED);
                        continue;
                }
                a->balance -= b->amts[i];
                a->debited = 1;
                transfer_debited(b->ctxs[i], b->amts[i]);
        }
}

/* 3. The new balances of the debited accounts, and 4. one ledger row per
 *    applied payment: one statement each. */
static int batch_write(struct batch *b)
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
        if (!u.n || (!b->host->exec(b->ctxs[0],
                                    "UPDATE account a SET balance = d.balance"
                                    " FROM unnest($1::bigint[], $2::bigint[]) AS d(user_id, balance)"
                                    " WHERE a.user_id = d.user_id",
                                    2, p1, NULL) &&
                     !b->host->exec(b->ctxs[0],
                                    "INSERT INTO transfer_ledger (idem_key, user_id, amount)"
                                    " SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])",
                                    3, p2, NULL)))
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
 * outcome of applying the messages one after another in offset order. A
 * failed statement (logged by the host) retries the batch: the host splits
 * it to find the message, if one is to blame. */
dedupd_result_t transfer_handle_batch(void *state, struct dedupd_ctx *const *ctxs, const struct dedupd_msg *const *msgs,
                                      size_t cnt, dedupd_result_t *results)
{
        struct batch b = {DEDUPD_HOST(ctxs[0]),
                          ctxs,
                          msgs,
                          cnt,
                          results,
                          calloc(cnt, sizeof(json_int_t)),
                          calloc(cnt, sizeof(json_int_t)),
                          calloc(cnt, sizeof(struct account)),
                          0};
        dedupd_result_t ret = DEDUPD_RETRY;

        (void)state;
        if (!b.uids || !b.amts || !b.acc)
                goto out;
        batch_parse(&b);
        if (b.nacc && batch_lock(&b))
                goto out;
        batch_decide(&b);
        if (batch_write(&b))
                goto out;
        ret = DEDUPD_OK;
out:
        free(b.uids);
        free(b.amts);
        free(b.acc);
        return ret;
}
