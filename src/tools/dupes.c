/* dupes: dedupctl dupes — where the absorbed duplicates of a namespace come from, from the sample dedupd records (provenance). */
#include "tools/dupes.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/isotime.h"
#include "base/log.h"
#include "pg/duplicates.h"
#include "pg/store.h"
#include "tools/rows.h"

#define DEFAULT_SINCE_MS (24LL * 3600 * 1000)

int dupes_parse(const char *since, const char *limit, const char *topic, struct dupes_opts *o, char *err, size_t errsz)
{
        char why[256];
        int64_t now = (int64_t)time(NULL) * 1000, ago;
        o->since_ms = now - DEFAULT_SINCE_MS;
        o->topic = topic;
        o->limit = 10;
        if (since && (ago = config_parse_duration(since)) >= 0)
                o->since_ms = now - ago;
        else if (since && isotime_parse(since, &o->since_ms, why, sizeof(why))) {
                snprintf(err, errsz, "--since '%s': neither a duration (24h, 30m) nor a time: %s", since, why);
                return -1;
        }
        if (limit) {
                char *end;
                long n = strtol(limit, &end, 10);
                if (*end || end == limit || n < 1 || n > 10000) {
                        snprintf(err, errsz, "--limit '%s': expected a number from 1 to 10000", limit);
                        return -1;
                }
                o->limit = (int)n;
        }
        return 0;
}

/* One table of the report under its title; -1 when the query failed. */
static int section(struct store *s, const struct config *cfg, const struct dupes_opts *o, enum store_dup_report what,
                   const char *title)
{
        PGresult *r = NULL;
        char err[512];
        if (store_dup_report(s, cfg->namespace, o->since_ms, o->topic, o->limit, what, &r, err, sizeof(err))) {
                fprintf(stderr, "dedupctl dupes: %s\n", err);
                return -1;
        }
        printf("\n%s:\n", title);
        rows_print(r);
        PQclear(r);
        return 0;
}

/* Why nothing may have been sampled: the topics' provenance.every. */
static void say_sampling(const struct config *cfg, const struct dupes_opts *o)
{
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                const struct topic_conf *t = &cfg->topics[i];
                if (o->topic && strcmp(o->topic, t->name))
                        continue;
                if (t->provenance_every > 0)
                        printf("  topic %s: one absorbed duplicate in %d is recorded (provenance.every)\n", t->name,
                               t->provenance_every);
                else
                        printf("  topic %s: none is recorded (provenance.every: 0)\n", t->name);
        }
}

int dupes_run(const struct config *cfg, const struct dupes_opts *o)
{
        PGresult *r = NULL;
        char err[512];
        struct store *s = store_open(cfg->pg_conninfo, err, sizeof(err));
        if (!s) {
                fprintf(stderr, "dedupctl dupes: %s\n", err);
                return 2;
        }
        if (store_dup_report(s, cfg->namespace, o->since_ms, o->topic, o->limit, DUP_TOTAL, &r, err, sizeof(err))) {
                fprintf(stderr, "dedupctl dupes: %s\n", err);
                store_free(s);
                return 2;
        }
        int64_t n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        printf("namespace %s%s%s: %" PRId64 " sampled duplicate(s)", cfg->namespace, o->topic ? ", topic " : "",
               o->topic ? o->topic : "", n);
        if (n)
                printf(", seen from %s to %s\n", PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2));
        PQclear(r);
        if (!n) {
                printf(" since then\n");
                say_sampling(cfg, o);
                store_free(s);
                return 1;
        }
        int rc = section(s, cfg, o, DUP_BY_ORIGIN,
                         "by origin (redelivery: that very message again; same-partition: another message of its "
                         "partition, a producer sent it twice; other-partition, other-topic)") ||
                                 section(s, cfg, o, DUP_BY_SOURCE, "by source (provenance.header)") ||
                                 section(s, cfg, o, DUP_BY_PLACE, "where they arrived")
                         ? 2
                         : 0;
        store_free(s);
        return rc;
}
