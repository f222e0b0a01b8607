/* verify: audit the dedup tables, the handlers' evidence and the lag, and list every anomaly. */
#include "tools/verify.h"

#include "base/mem.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/loader.h"
#include "pg/audit.h"
#include "pg/evidence.h"
#include "pg/offsets.h"
#include "pg/store.h"
#include "source/brokers.h"
#include "tools/catch_up.h"
#include "tools/mismatch_report.h"

static const char *const statuses[] = {"DONE", "FAILED", "PENDING", "EXPIRED"};
#define STATUS_CNT 4

static const char *const evidence_checks[STORE_EVIDENCE_CHECKS] = {
        "keys with more than one effect",
        "DONE keys with no effect",
        "FAILED keys with an effect",
};
static const char *const evidence_kinds[STORE_EVIDENCE_CHECKS] = {"two-effects", "done-without-effect",
                                                                  "failed-with-effect"};

/* Anomalies, each one line, printed together at the end. */
struct findings {
        char **lines;
        size_t cnt, cap;
};

static void add(struct findings *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct findings *f, const char *fmt, ...)
{
        va_list ap;
        char *line = NULL;
        if (f->cnt == f->cap) {
                size_t cap = f->cap ? f->cap * 2 : 64;
                char **nl = xrealloc(f->lines, cap * sizeof(*nl));
                f->lines = nl;
                f->cap = cap;
        }
        va_start(ap, fmt);
        line = xvasprintf(fmt, ap);
        va_end(ap);
        f->lines[f->cnt++] = line;
}

static void findings_free(struct findings *f)
{
        for (size_t i = 0; i < f->cnt; i++)
                free(f->lines[i]);
        free(f->lines);
}

/* "payments/2 offset 17", from columns topic, partition, offset (NULL-able). */
static void origin(const PGresult *r, int row, int col, char *buf, size_t sz)
{
        if (PQgetisnull(r, row, col))
                snprintf(buf, sz, "no dedup record");
        else
                snprintf(buf, sz, "from %s/%s offset %s", PQgetvalue(r, row, col), PQgetvalue(r, row, col + 1),
                         PQgetvalue(r, row, col + 2));
}

static int keys_by_status(struct store *s, const char *ns, struct findings *f, char *err, size_t errsz)
{
        int64_t cnt[STATUS_CNT] = {0}, total = 0;
        PGresult *r = NULL;
        if (store_audit_statuses(s, ns, &r, err, errsz))
                return -1;
        for (int row = 0; row < PQntuples(r); row++)
                for (int k = 0; k < STATUS_CNT; k++)
                        if (!strcmp(PQgetvalue(r, row, 0), statuses[k]))
                                cnt[k] = strtoll(PQgetvalue(r, row, 1), NULL, 10);
        PQclear(r);
        printf("keys by status\n");
        for (int k = 0; k < STATUS_CNT; k++) {
                printf("  %-32s %10" PRId64 "\n", statuses[k], cnt[k]);
                total += cnt[k];
        }
        printf("  %-32s %10" PRId64 "\n", "total", total);

        if (store_audit_in_doubt(s, ns, &r, err, errsz))
                return -1;
        for (int row = 0; row < PQntuples(r); row++) {
                char o[256];
                origin(r, row, 2, o, sizeof(o));
                add(f, "in-doubt: key %s (%s): %s since %s", PQgetvalue(r, row, 0), o, PQgetvalue(r, row, 1),
                    PQgetvalue(r, row, 5));
        }
        printf("  %-32s %10d\n", "in doubt (EXPIRED, PENDING>10m)", PQntuples(r));
        PQclear(r);
        return 0;
}

static int counters(struct store *s, const struct config *cfg, const struct verify_opts *o, char *err, size_t errsz)
{
        static const char *const names[] = {"consumed", "applied", "rejected", "duplicates absorbed", "dead-lettered"};
        PGresult *r = NULL;
        if (store_audit_counters(s, cfg->namespace, &r, err, errsz))
                return -1;
        printf("\nrecords vs keys (dedupd.offsets, all time)\n");
        for (int c = 0; c < 5; c++) {
                printf("  %-32s %10s", names[c], PQgetvalue(r, 0, c));
                if (c == 1)
                        printf("   DONE keys   %s", PQgetvalue(r, 0, 5));
                else if (c == 2)
                        printf("   FAILED keys %s", PQgetvalue(r, 0, 6));
                printf("\n");
        }
        printf("  %-32s %10s\n", "distinct keys", PQgetvalue(r, 0, 7));
        PQclear(r);
        if (o->since_ms < 0)
                return 0;
        if (store_audit_since(s, cfg->namespace, o->since_ms, &r, err, errsz))
                return -1;
        printf("\nsince %s (dedupd.progress_log, %s batches)\n", PQgetvalue(r, 0, 6), PQgetvalue(r, 0, 5));
        for (int c = 0; c < 5; c++)
                printf("  %-32s %10s\n", names[c], PQgetvalue(r, 0, c));
        PQclear(r);
        return 0;
}

/* The evidence a topic's handler declares, and the topics it serves. */
struct evidence {
        char *handler, *table, *column;
        const char **topics;
        size_t ntopics;
};

static struct evidence *evidence_find(struct evidence *ev, size_t n, const char *table, const char *column)
{
        for (size_t i = 0; i < n; i++)
                if (!strcmp(ev[i].table, table) && !strcmp(ev[i].column, column))
                        return &ev[i];
        return NULL;
}

/* What a handler built before ABI 1.2 declares in its descriptor (loading
 * runs nothing of it but its descriptor function): *table NULL when nothing. */
static void evidence_of_descriptor(const struct topic_conf *t, char **handler, char **table, char **column)
{
        struct handler h = {0};
        char lerr[512];
        if (loader_open(&h, t->handler_path, lerr, sizeof(lerr))) {
                printf("  (topic %s: handler not loadable, its effects are not checked: %s)\n", t->name, lerr);
                return;
        }
        const struct dedupd_handler *d = h.desc;
        *handler = xstrdup(d->name ? d->name : "?");
        if (DEDUPD_HANDLER_HAS(d, evidence_table) && d->evidence_table) {
                *table = xstrdup(d->evidence_table);
                *column = xstrdup(DEDUPD_HANDLER_HAS(d, evidence_key_column) && d->evidence_key_column
                                          ? d->evidence_key_column
                                          : "idem_key");
        } else {
                printf("  (topic %s: handler %s declares no evidence table: only keys, counters and lag are "
                       "checked)\n",
                       t->name, *handler);
        }
        loader_close(&h);
}

/* What the topic's handler declared: what it recorded at init (set_evidence,
 * dedupd.evidence), else its descriptor's fields. Checked here too: the names
 * are read from a table anyone with write access could have changed. */
static int evidence_declared(struct store *s, const struct config *cfg, const struct topic_conf *t, char **handler,
                             char **table, char **column, char *err, size_t errsz)
{
        char bad[512];
        *handler = *table = *column = NULL;
        if (store_evidence_declared(s, cfg->namespace, t->name, handler, table, column, err, errsz))
                return -1;
        if (!*table) {
                free(*handler);
                *handler = NULL;
                evidence_of_descriptor(t, handler, table, column);
        }
        if (*table && store_evidence_names_ok(*table, *column, bad, sizeof(bad))) {
                printf("  (topic %s: %s: its effects are not checked)\n", t->name, bad);
                free(*table);
                free(*column);
                *table = *column = NULL;
        }
        return 0;
}

/* Each configured topic's evidence, topics sharing one table together. */
static int evidence_of(struct store *s, const struct config *cfg, struct evidence *ev, size_t *n, char *err,
                       size_t errsz)
{
        for (size_t t = 0; t < cfg->topic_cnt; t++) {
                char *handler, *table, *column;
                if (evidence_declared(s, cfg, &cfg->topics[t], &handler, &table, &column, err, errsz))
                        return -1;
                struct evidence *e = table ? evidence_find(ev, *n, table, column) : NULL;
                if (table && !e) {
                        e = &ev[(*n)++];
                        *e = (struct evidence){handler, table, column, xcalloc(cfg->topic_cnt, sizeof(char *)), 0};
                        handler = table = column = NULL;
                }
                if (e)
                        e->topics[e->ntopics++] = cfg->topics[t].name;
                free(handler);
                free(table);
                free(column);
        }
        return 0;
}

static int evidence_check(struct store *s, const struct config *cfg, const struct evidence *e, struct findings *f,
                          char *err, size_t errsz)
{
        char shown[256] = "";
        int exists = 0, has_column = 0;
        if (store_evidence_exists(s, e->table, e->column, &exists, &has_column, err, errsz))
                return -1;
        if (!exists) {
                printf("  %s: no table %s yet\n", e->handler, e->table);
                return 0;
        }
        if (!has_column) {
                add(f, "evidence: table %s has no column %s: the effects of %s are not checked", e->table, e->column,
                    e->handler);
                return 0;
        }
        for (size_t i = 0; i < e->ntopics; i++)
                snprintf(shown + strlen(shown), sizeof(shown) - strlen(shown), "%s%s", i ? ", " : "", e->topics[i]);
        printf("  %s (handler %s, topic%s %s)\n", e->table, e->handler, e->ntopics > 1 ? "s" : "", shown);
        for (int c = 0; c < STORE_EVIDENCE_CHECKS; c++) {
                PGresult *r = NULL;
                if (store_audit_evidence(s, cfg->namespace, e->table, e->column, e->topics, e->ntopics,
                                         (enum store_evidence_check)c, &r, err, errsz))
                        return -1;
                for (int row = 0; row < PQntuples(r); row++) {
                        char o[256];
                        origin(r, row, 2, o, sizeof(o));
                        add(f, "%s: key %s (%s): %s row%s in %s", evidence_kinds[c], PQgetvalue(r, row, 0), o,
                            PQgetvalue(r, row, 1), strcmp(PQgetvalue(r, row, 1), "1") ? "s" : "", e->table);
                }
                printf("    %-30s %10d\n", evidence_checks[c], PQntuples(r));
                PQclear(r);
        }
        return 0;
}

static int evidence(struct store *s, const struct config *cfg, struct findings *f, char *err, size_t errsz)
{
        struct evidence *ev = xcalloc(cfg->topic_cnt ? cfg->topic_cnt : 1, sizeof(*ev));
        size_t n;
        int rc = 0;

        printf("\neffects (the evidence each handler declares)\n");
        n = 0;
        rc = evidence_of(s, cfg, ev, &n, err, errsz);
        for (size_t i = 0; i < n && !rc; i++)
                rc = evidence_check(s, cfg, &ev[i], f, err, errsz);
        for (size_t i = 0; i < n; i++) {
                free(ev[i].handler);
                free(ev[i].table);
                free(ev[i].column);
                free(ev[i].topics);
        }
        free(ev);
        return rc;
}

static void add_line(void *opaque, const char *line) { add(opaque, "%s", line); }

/* The broker's side: its own lag table. */
static int broker_lag(struct store *s, const struct config *cfg, const struct verify_opts *o, struct findings *f,
                      char *err, size_t errsz)
{
        return broker_of(cfg)->lag(s, cfg, stdout, o->expect_caught_up, add_line, f, err, errsz);
}

enum verify_rc verify_run(const struct config *cfg, const struct verify_opts *o, char *err, size_t errsz)
{
        struct store *s = store_open(cfg->pg_conninfo, err, errsz);
        struct findings f = {0};
        enum verify_rc rc = VERIFY_ERROR;
        int exists = 0;

        if (!s)
                return VERIFY_ERROR;
        /* Waited or not, the lag is then part of the audit: behind is an anomaly. */
        if (o->wait_s >= 0 && catch_up_wait(s, cfg, o->wait_s, err, errsz) == CATCH_UP_ERROR)
                goto out;
        if (store_relation_exists(s, "dedupd.progress_log", &exists, err, errsz))
                goto out;
        if (!exists) {
                snprintf(err, errsz, "no dedupd schema (or an old one) in database %s: run dedupctl migrate",
                         store_target(s));
                goto out;
        }
        printf("namespace %s, database %s\n\n", cfg->namespace, store_target(s));
        if (keys_by_status(s, cfg->namespace, &f, err, errsz) || counters(s, cfg, o, err, errsz) ||
            mismatch_report(s, cfg->namespace, err, errsz) || evidence(s, cfg, &f, err, errsz) ||
            broker_lag(s, cfg, o, &f, err, errsz))
                goto out;
        if (f.cnt) {
                printf("\n%zu anomal%s:\n", f.cnt, f.cnt == 1 ? "y" : "ies");
                for (size_t i = 0; i < f.cnt; i++)
                        printf("  %s\n", f.lines[i]);
                rc = VERIFY_ANOMALIES;
        } else {
                printf("\nno anomaly: no key with two effects, every DONE key has its effect, no FAILED key "
                       "has one, nothing in doubt%s\n",
                       o->expect_caught_up ? ", every partition caught up" : "");
                rc = VERIFY_OK;
        }
out:
        if (rc == VERIFY_ERROR && f.cnt) {
                /* Found before the failure: still worth knowing. */
                fprintf(stderr, "anomalies found before the error:\n");
                for (size_t i = 0; i < f.cnt; i++)
                        fprintf(stderr, "  %s\n", f.lines[i]);
        }
        findings_free(&f);
        store_free(s);
        return rc;
}
