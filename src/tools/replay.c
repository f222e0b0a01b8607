/* replay: move a group back (Kafka's committed offsets and dedupd.offsets together) or re-produce records. */
#include "tools/replay.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "source/kafka/client.h"
#include "base/log.h"
#include "pg/store.h"
#include "pg/offsets.h"
#include "pg/schema.h"

#define STALL_MS 60000 /* no record and no acknowledgement for this long: give up */
#define REPRODUCE_GROUP "dedupctl-reproduce" /* assign() needs a group; it never commits */

/* What is known of one partition. */
struct part {
        int32_t id;
        int64_t lo, hi;    /* watermarks when the command started */
        int64_t committed; /* Kafka's committed offset of the group, -1: none */
        int64_t db;        /* dedupd.offsets.next_offset, -1: no row */
        int64_t from, to;  /* reset: `to` is the new position; reproduce: [from, to) */
        int done;
};

/* ---- input ------------------------------------------------------------------ */

/* "2026-11-29T20:00:00.000Z" */
static const char *fmt_time(int64_t ms, char *buf, size_t sz)
{
        time_t t = (time_t)(ms / 1000);
        struct tm tm;
        size_t off;
        gmtime_r(&t, &tm);
        off = strftime(buf, sz, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + off, sz - off, ".%03dZ", (int)(ms % 1000));
        return buf;
}

static int take_digits(const char **p, int n, int *out)
{
        int v = 0;
        for (int i = 0; i < n; i++) {
                if (!isdigit((unsigned char)(*p)[i]))
                        return -1;
                v = v * 10 + ((*p)[i] - '0');
        }
        *p += n;
        *out = v;
        return 0;
}

int replay_parse_time(const char *s, int64_t *ms, char *err, size_t errsz)
{
        const char *p = s;
        int y, mo, d, h, mi, sec = 0, frac_ms = 0, zone_min = 0;
        size_t len = strlen(s);

        if (len && strspn(s, "0123456789") == len) {
                /* 12 digits: 1973 in milliseconds. Fewer are surely seconds, which
                 * would quietly mean January 1970. */
                if (len < 12 || len > 15) {
                        snprintf(err, errsz, "'%s' is not epoch milliseconds%s", s,
                                 len == 10 ? " (it looks like seconds: append 000)" : "");
                        return -1;
                }
                *ms = strtoll(s, NULL, 10);
                return 0;
        }
        if (take_digits(&p, 4, &y) || *p++ != '-' || take_digits(&p, 2, &mo) || *p++ != '-' ||
            take_digits(&p, 2, &d) || (*p != 'T' && *p != 't' && *p != ' '))
                goto bad;
        p++;
        if (take_digits(&p, 2, &h) || *p++ != ':' || take_digits(&p, 2, &mi))
                goto bad;
        if (*p == ':') {
                p++;
                if (take_digits(&p, 2, &sec))
                        goto bad;
                if (*p == '.' || *p == ',') {
                        int digits = 0, scale = 100;
                        for (p++; isdigit((unsigned char)*p); p++, digits++) {
                                frac_ms += (*p - '0') * scale;
                                scale /= 10;
                        }
                        if (!digits)
                                goto bad;
                }
        }
        if (*p == 'Z' || *p == 'z') {
                p++;
        } else if (*p == '+' || *p == '-') {
                int sign = *p++ == '-' ? -1 : 1, zh, zm = 0;
                if (take_digits(&p, 2, &zh))
                        goto bad;
                if (*p == ':')
                        p++;
                if (*p && take_digits(&p, 2, &zm))
                        goto bad;
                if (zh > 23 || zm > 59)
                        goto bad;
                zone_min = sign * (zh * 60 + zm);
        } else if (!*p) {
                snprintf(err, errsz, "'%s' has no time zone: add Z for UTC or an offset like +01:00", s);
                return -1;
        } else {
                goto bad;
        }
        if (*p || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
                goto bad;
        struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h,
                        .tm_min = mi, .tm_sec = sec};
        time_t t = timegm(&tm);
        if (tm.tm_mday != d || tm.tm_mon != mo - 1) /* timegm normalised 2026-02-30 */
                goto bad;
        *ms = ((int64_t)t - (int64_t)zone_min * 60) * 1000 + frac_ms;
        return 0;
bad:
        snprintf(err, errsz, "bad time '%s': expected ISO-8601 like 2026-11-29T20:00:00Z or epoch "
                             "milliseconds",
                 s);
        return -1;
}

int replay_parse_partitions(const char *s, int32_t **out, size_t *cnt, char *err, size_t errsz)
{
        size_t n = 1;
        int32_t *v;
        const char *p = s;

        for (const char *q = s; *q; q++)
                n += *q == ',';
        v = calloc(n, sizeof(*v));
        if (!v) {
                snprintf(err, errsz, "out of memory");
                return -1;
        }
        for (size_t i = 0; i < n; i++) {
                char *end;
                long x;
                if (!isdigit((unsigned char)*p))
                        goto bad;
                x = strtol(p, &end, 10);
                if (x > INT32_MAX || (*end && *end != ','))
                        goto bad;
                for (size_t k = 0; k < i; k++)
                        if (v[k] == (int32_t)x) {
                                snprintf(err, errsz, "partition %ld is listed twice in '%s'", x, s);
                                free(v);
                                return -1;
                        }
                v[i] = (int32_t)x;
                p = *end ? end + 1 : end;
        }
        *out = v;
        *cnt = n;
        return 0;
bad:
        snprintf(err, errsz, "bad partition list '%s': expected numbers like 0,2", s);
        free(v);
        return -1;
}

/* ---- Kafka clients ------------------------------------------------------------ */

/* ---- progress ----------------------------------------------------------------- */

/* One \r-updated line on a terminal, a plain line every few seconds otherwise. */
struct progress {
        const char *what, *unit;
        int64_t total, start_ms, shown_ms;
        int tty, drawn;
};

static void progress_start(struct progress *p, const char *what, const char *unit, int64_t total)
{
        p->what = what;
        p->unit = unit;
        p->total = total;
        p->start_ms = p->shown_ms = log_now_ms();
        p->tty = isatty(STDERR_FILENO);
        p->drawn = 0;
}

static void progress_show(struct progress *p, int64_t done, int64_t sent, int final)
{
        int64_t now = log_now_ms();
        double secs = (double)(now - p->start_ms) / 1000.0, rate;
        char eta[32], extra[48] = "";

        if (!final && now - p->shown_ms < (p->tty ? 200 : 5000))
                return;
        if (final && !p->tty)
                return; /* the summary says it */
        p->shown_ms = now;
        rate = secs > 0 ? (double)done / secs : 0.0;
        if (done >= p->total)
                snprintf(eta, sizeof(eta), "0s");
        else if (rate > 0)
                snprintf(eta, sizeof(eta), "%.0fs", (double)(p->total - done) / rate);
        else
                snprintf(eta, sizeof(eta), "?");
        if (sent > done)
                snprintf(extra, sizeof(extra), " (%" PRId64 " sent)", sent);
        fprintf(stderr, "%s%s: %" PRId64 "/%" PRId64 " %s%s (%d%%), %.0f/s, ETA %s%s", p->tty ? "\r" : "",
                p->what, done, p->total, p->unit, extra, p->total ? (int)(done * 100 / p->total) : 100, rate,
                eta, p->tty ? "\033[K" : "\n");
        if (p->tty && final)
                fputc('\n', stderr);
        fflush(stderr);
        p->drawn = 1;
}

/* ---- where things are --------------------------------------------------------- */

/* The selected partitions of o->topic with their watermarks. */
static enum replay_rc read_partitions(rd_kafka_t *rk, const struct replay_opts *o, struct part **out,
                                      size_t *cnt, char *err, size_t errsz)
{
        struct progress pr;
        struct part *ps;
        int total = kafka_partition_count(rk, o->topic, err, errsz);
        size_t n;

        if (total < 0)
                return REPLAY_USAGE;
        n = o->partitions ? o->partition_cnt : (size_t)total;
        ps = calloc(n ? n : 1, sizeof(*ps));
        if (!ps) {
                snprintf(err, errsz, "out of memory");
                return REPLAY_FAILED;
        }
        for (size_t i = 0; i < n; i++) {
                ps[i].id = o->partitions ? o->partitions[i] : (int32_t)i;
                if (ps[i].id >= total) {
                        snprintf(err, errsz, "partition %d is out of range: topic %s has partitions 0..%d",
                                 (int)ps[i].id, o->topic, total - 1);
                        free(ps);
                        return REPLAY_USAGE;
                }
                ps[i].committed = ps[i].db = -1;
        }
        progress_start(&pr, "reading watermarks", "partitions", (int64_t)n);
        for (size_t i = 0; i < n; i++) {
                rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, o->topic, ps[i].id, &ps[i].lo,
                                                                         &ps[i].hi, KAFKA_TIMEOUT_MS);
                if (e) {
                        snprintf(err, errsz, "watermarks of %s/%d: %s", o->topic, (int)ps[i].id,
                                 rd_kafka_err2str(e));
                        free(ps);
                        return REPLAY_FAILED;
                }
                progress_show(&pr, (int64_t)i + 1, 0, 0);
        }
        if (pr.drawn)
                progress_show(&pr, (int64_t)n, 0, 1);
        *out = ps;
        *cnt = n;
        return REPLAY_OK;
}

/* The first offset whose timestamp is >= ts_ms per partition; the high
 * watermark where no record is that recent. */
static int offsets_at(rd_kafka_t *rk, const char *topic, const struct part *ps, size_t n,
                      int64_t ts_ms, int64_t *out, char *err, size_t errsz)
{
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
        rd_kafka_resp_err_t e;
        int rc = -1;

        for (size_t i = 0; i < n; i++)
                rd_kafka_topic_partition_list_add(l, topic, ps[i].id)->offset = ts_ms;
        e = rd_kafka_offsets_for_times(rk, l, KAFKA_TIMEOUT_MS);
        if (e) {
                snprintf(err, errsz, "offsets by time of %s: %s", topic, rd_kafka_err2str(e));
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                const rd_kafka_topic_partition_t *tp = &l->elems[i];
                if (tp->err) {
                        snprintf(err, errsz, "offset by time of %s/%d: %s", topic, (int)tp->partition,
                                 rd_kafka_err2str(tp->err));
                        goto out;
                }
                out[i] = tp->offset >= 0 ? tp->offset : ps[i].hi;
        }
        rc = 0;
out:
        rd_kafka_topic_partition_list_destroy(l);
        return rc;
}

static int read_committed(rd_kafka_t *rk, const char *topic, struct part *ps, size_t n, char *err,
                          size_t errsz)
{
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
        rd_kafka_resp_err_t e;
        for (size_t i = 0; i < n; i++)
                rd_kafka_topic_partition_list_add(l, topic, ps[i].id);
        e = rd_kafka_committed(rk, l, KAFKA_TIMEOUT_MS);
        if (e)
                snprintf(err, errsz, "committed offsets of the group: %s", rd_kafka_err2str(e));
        for (size_t i = 0; !e && i < n; i++)
                ps[i].committed = l->elems[i].offset >= 0 ? l->elems[i].offset : -1;
        rd_kafka_topic_partition_list_destroy(l);
        return e ? -1 : 0;
}

static int read_db_offsets(struct store *st, const char *ns, const char *topic, struct part *ps, size_t n,
                           char *err, size_t errsz)
{
        struct store_position *pos = NULL;
        size_t npos = 0;
        if (store_positions(st, ns, topic, &pos, &npos, err, errsz))
                return -1;
        for (size_t k = 0; k < npos; k++)
                for (size_t i = 0; i < n; i++)
                        if (ps[i].id == pos[k].partition)
                                ps[i].db = pos[k].next_offset;
        free(pos);
        return 0;
}

/* ---- reset ---------------------------------------------------------------------- */

static int refused_code(rd_kafka_resp_err_t e)
{
        return e == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID || e == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS ||
               e == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION;
}

static rd_kafka_event_t *admin_wait(rd_kafka_queue_t *q, char *err, size_t errsz, const char *what)
{
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, KAFKA_TIMEOUT_MS + 5000);
        if (!ev) {
                snprintf(err, errsz, "%s: no answer from the broker", what);
                return NULL;
        }
        if (rd_kafka_event_error(ev)) {
                snprintf(err, errsz, "%s: %s", what, rd_kafka_event_error_string(ev));
                rd_kafka_event_destroy(ev);
                return NULL;
        }
        return ev;
}

/* 1 when the group has members (reason in err), 0 when Empty or Dead, -1
 * when the broker could not say (the OffsetCommit check still applies). */
static int group_active(rd_kafka_t *rk, const char *group, char *err, size_t errsz)
{
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
        const char *groups[1] = {group};
        char ebuf[256];
        int rc = -1;

        rd_kafka_AdminOptions_set_request_timeout(opts, KAFKA_TIMEOUT_MS, ebuf, sizeof(ebuf));
        rd_kafka_DescribeConsumerGroups(rk, groups, 1, opts, q);
        rd_kafka_event_t *ev = admin_wait(q, err, errsz, "describing the group");
        if (ev) {
                size_t cnt = 0;
                const rd_kafka_ConsumerGroupDescription_t **gs = rd_kafka_DescribeConsumerGroups_result_groups(
                        rd_kafka_event_DescribeConsumerGroups_result(ev), &cnt);
                const rd_kafka_error_t *ge = cnt == 1 ? rd_kafka_ConsumerGroupDescription_error(gs[0]) : NULL;
                if (cnt != 1 || ge) {
                        snprintf(err, errsz, "describing group %s: %s", group,
                                 ge ? rd_kafka_error_string(ge) : "no result");
                } else {
                        rd_kafka_consumer_group_state_t st = rd_kafka_ConsumerGroupDescription_state(gs[0]);
                        size_t members = rd_kafka_ConsumerGroupDescription_member_count(gs[0]);
                        rc = members > 0 || st == RD_KAFKA_CONSUMER_GROUP_STATE_STABLE ||
                             st == RD_KAFKA_CONSUMER_GROUP_STATE_PREPARING_REBALANCE ||
                             st == RD_KAFKA_CONSUMER_GROUP_STATE_COMPLETING_REBALANCE;
                        if (rc) {
                                const rd_kafka_MemberDescription_t *m =
                                        members ? rd_kafka_ConsumerGroupDescription_member(gs[0], 0) : NULL;
                                snprintf(err, errsz,
                                         "group %s has active members (state %s, %zu member%s%s%s%s%s); "
                                         "stop the dedupd instances first",
                                         group, rd_kafka_consumer_group_state_name(st), members,
                                         members == 1 ? "" : "s", m ? ": " : "",
                                         m ? rd_kafka_MemberDescription_client_id(m) : "", m ? " on " : "",
                                         m ? rd_kafka_MemberDescription_host(m) : "");
                        }
                }
                rd_kafka_event_destroy(ev);
        }
        rd_kafka_AdminOptions_destroy(opts);
        rd_kafka_queue_destroy(q);
        return rc;
}

/* Commit the new offsets for the group through the Admin API (an OffsetCommit
 * from outside the group): the broker refuses it while the group has members. */
static enum replay_rc alter_offsets(rd_kafka_t *rk, const char *group, const char *topic,
                                   const struct part *ps, size_t n, char *err, size_t errsz)
{
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS);
        rd_kafka_AlterConsumerGroupOffsets_t *alter;
        enum replay_rc rc = REPLAY_FAILED;
        char ebuf[256];

        for (size_t i = 0; i < n; i++)
                rd_kafka_topic_partition_list_add(l, topic, ps[i].id)->offset = ps[i].to;
        alter = rd_kafka_AlterConsumerGroupOffsets_new(group, l);
        rd_kafka_AdminOptions_set_request_timeout(opts, KAFKA_TIMEOUT_MS, ebuf, sizeof(ebuf));
        rd_kafka_AlterConsumerGroupOffsets(rk, &alter, 1, opts, q);
        rd_kafka_event_t *ev = admin_wait(q, err, errsz, "committing the new offsets");
        if (ev) {
                size_t cnt = 0;
                const rd_kafka_group_result_t **gr = rd_kafka_AlterConsumerGroupOffsets_result_groups(
                        rd_kafka_event_AlterConsumerGroupOffsets_result(ev), &cnt);
                const rd_kafka_error_t *ge = cnt == 1 ? rd_kafka_group_result_error(gr[0]) : NULL;
                const rd_kafka_topic_partition_list_t *res = cnt == 1 ? rd_kafka_group_result_partitions(gr[0]) : NULL;
                rd_kafka_resp_err_t e = ge ? rd_kafka_error_code(ge) : RD_KAFKA_RESP_ERR_NO_ERROR;
                for (int i = 0; !e && res && i < res->cnt; i++)
                        e = res->elems[i].err;
                if (cnt != 1) {
                        snprintf(err, errsz, "committing the new offsets: no result");
                } else if (refused_code(e)) {
                        snprintf(err, errsz, "group %s has active members (the broker refused the commit: %s); "
                                             "stop the dedupd instances first",
                                 group, rd_kafka_err2name(e));
                } else if (e) {
                        snprintf(err, errsz, "committing the new offsets of group %s: %s", group,
                                 ge ? rd_kafka_error_string(ge) : rd_kafka_err2str(e));
                } else {
                        rc = REPLAY_OK;
                }
                rd_kafka_event_destroy(ev);
        }
        rd_kafka_AlterConsumerGroupOffsets_destroy(alter);
        rd_kafka_AdminOptions_destroy(opts);
        rd_kafka_queue_destroy(q);
        rd_kafka_topic_partition_list_destroy(l);
        return rc;
}

static int64_t current_of(const struct part *p)
{
        /* Where dedupd would start: the table where it has a row, else Kafka. */
        return p->db >= 0 ? p->db : p->committed >= 0 ? p->committed : p->lo;
}

static void print_pos(int64_t v)
{
        if (v >= 0)
                printf(" %10" PRId64, v);
        else
                printf(" %10s", "-");
}

static enum replay_rc reset(const struct config *cfg, const struct replay_opts *o, char *err, size_t errsz)
{
        const char *group = kafka_property(cfg, "group.id");
        struct store *s = NULL;
        struct part *ps = NULL;
        size_t n = 0;
        rd_kafka_t *rk = NULL;
        int64_t *at = NULL, again = 0, skipped = 0, start = log_now_ms();
        enum replay_rc rc;

        if (!config_topic(cfg, o->topic)) {
                snprintf(err, errsz, "topic %s is not in %s: dedupd does not consume it", o->topic, cfg->path);
                return REPLAY_USAGE;
        }
        if (!group) {
                snprintf(err, errsz, "the config sets no kafka group.id");
                return REPLAY_USAGE;
        }
        rk = kafka_client(cfg, RD_KAFKA_CONSUMER, KAFKA_ROLE_CLIENT, group, err, errsz);
        if (!rk)
                return REPLAY_USAGE;
        if ((rc = read_partitions(rk, o, &ps, &n, err, errsz)))
                goto out;
        rc = REPLAY_USAGE;
        if (o->to_time_ms >= 0) {
                if (!(at = calloc(n ? n : 1, sizeof(*at)))) {
                        snprintf(err, errsz, "out of memory");
                        rc = REPLAY_FAILED;
                        goto out;
                }
                if (offsets_at(rk, o->topic, ps, n, o->to_time_ms, at, err, errsz))
                        goto out;
        }
        for (size_t i = 0; i < n; i++) {
                struct part *p = &ps[i];
                p->to = o->to_beginning ? p->lo : at ? at[i] : o->to_offset;
                if (p->to < p->lo || p->to > p->hi) {
                        snprintf(err, errsz, "offset %" PRId64 " is outside partition %s/%d, which holds %" PRId64
                                             "..%" PRId64,
                                 p->to, o->topic, (int)p->id, p->lo, p->hi);
                        goto out;
                }
        }
        rc = REPLAY_FAILED;
        if (read_committed(rk, o->topic, ps, n, err, errsz))
                goto out;
        if (!(s = store_open(cfg->pg_conninfo, err, errsz))) {
                rc = REPLAY_USAGE;
                goto out;
        }
        if (read_db_offsets(s, cfg->namespace, o->topic, ps, n, err, errsz))
                goto out;

        int active = group_active(rk, group, err, errsz);
        if (active == 1 && !o->dry_run)
                goto out; /* REPLAY_FAILED with the reason */
        if (active < 0)
                log_warn("replay", "%s; relying on the broker to refuse a commit while the group has members", err);

        char target[64];
        if (o->to_beginning)
                snprintf(target, sizeof(target), "the beginning");
        else if (at)
                fmt_time(o->to_time_ms, target, sizeof(target));
        else
                snprintf(target, sizeof(target), "offset %" PRId64, o->to_offset);
        printf("group %s, namespace %s, topic %s: reset to %s\n", group, cfg->namespace, o->topic, target);
        printf("%9s %10s %10s %10s %10s %10s %12s\n", "partition", "low", "high", "kafka", "dedupd", "new",
               "redelivered");
        for (size_t i = 0; i < n; i++) {
                const struct part *p = &ps[i];
                int64_t cur = current_of(p);
                printf("%9d", (int)p->id);
                print_pos(p->lo);
                print_pos(p->hi);
                print_pos(p->committed);
                print_pos(p->db);
                print_pos(p->to);
                if (p->to <= cur) {
                        printf(" %12" PRId64 "\n", cur - p->to);
                        again += cur - p->to;
                } else {
                        printf(" %12s\n", "(skips)");
                        skipped += p->to - cur;
                }
        }
        if (skipped)
                printf("warning: moving forward skips %" PRId64 " records that were never processed\n", skipped);

        if (active == 1)
                goto out; /* a dry run shows the plan, then the refusal a real run would meet */
        if (o->dry_run) {
                printf("dry run: nothing changed (%" PRId64 " records would be delivered again)\n", again);
                rc = REPLAY_OK;
                goto out;
        }

        /*
         * Order: the database first, committed last. The new positions are
         * written inside an open transaction, Kafka's offsets are moved, and
         * only when the broker accepted them is the transaction committed.
         *  - Kafka refuses (active members) or fails: ROLLBACK, nothing moved.
         *  - COMMIT fails after Kafka moved: Kafka is behind the table, which
         *    is what dedupd's invariant already allows (Kafka is never ahead of
         *    the database); dedupd starts from the table, so no replay happens
         *    and running the command again finishes it.
         * The other order could leave the table moved and Kafka not: dedupd
         * would replay (the table is authoritative) while Kafka's committed
         * offsets sit ahead of the database, which monitoring reads as done.
         */
        if (store_migrate(s, err, errsz) || store_begin(s, err, errsz))
                goto out;
        {
                int32_t ids[n ? n : 1];
                int64_t to[n ? n : 1];
                for (size_t i = 0; i < n; i++) {
                        ids[i] = ps[i].id;
                        to[i] = ps[i].to;
                }
                if (store_offsets_set(s, cfg->namespace, o->topic, n, ids, to, err, errsz)) {
                        char tmp[512];
                        snprintf(tmp, sizeof(tmp), "updating dedupd.offsets: %s", err);
                        snprintf(err, errsz, "%s", tmp);
                        goto out;
                }
        }
        if ((rc = alter_offsets(rk, group, o->topic, ps, n, err, errsz)))
                goto out;
        rc = REPLAY_FAILED;
        if (store_commit(s, err, errsz) != STORE_OK) {
                char tmp[512];
                snprintf(tmp, sizeof(tmp), "%s", err);
                snprintf(err, errsz, "Kafka's committed offsets were moved but the database's were not (%s); "
                                     "dedupd starts from the database, so nothing will be replayed: run the "
                                     "command again",
                         tmp);
                goto out;
        }
        printf("reset %zu partition%s of %s for group %s: %" PRId64 " records will be delivered again "
               "(%.1f s)\n",
               n, n == 1 ? "" : "s", o->topic, group, again, (double)(log_now_ms() - start) / 1000.0);
        rc = REPLAY_OK;
out:
        if (s)
                store_rollback(s); /* a no-op after COMMIT */
        store_free(s);
        free(at);
        free(ps);
        if (rk)
                rd_kafka_destroy(rk);
        return rc;
}

/* ---- reproduce ------------------------------------------------------------------ */

struct acks {
        int64_t delivered, failed;
        char first_error[256];
};

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
        struct acks *a = opaque;
        (void)rk;
        if (m->err) {
                if (!a->failed++)
                        snprintf(a->first_error, sizeof(a->first_error), "%s", rd_kafka_err2str(m->err));
        } else {
                a->delivered++;
        }
}

static struct part *find_part(struct part *ps, size_t n, int32_t id)
{
        for (size_t i = 0; i < n; i++)
                if (ps[i].id == id)
                        return &ps[i];
        return NULL;
}

/* Produce one record again, unchanged: same partition, key, value (or null)
 * and headers. The producer takes the headers on success only. */
static rd_kafka_resp_err_t produce_again(rd_kafka_t *p, const char *topic, rd_kafka_message_t *m)
{
        rd_kafka_headers_t *h = NULL;
        rd_kafka_resp_err_t e;

        if (rd_kafka_message_detach_headers(m, &h) || !h)
                h = rd_kafka_headers_new(0);
        do {
                e = rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(m->partition),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(m->key, m->key_len),
                                      RD_KAFKA_V_VALUE(m->payload, m->len), RD_KAFKA_V_HEADERS(h),
                                      RD_KAFKA_V_END);
                if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                        rd_kafka_poll(p, 50);
        } while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL);
        if (e)
                rd_kafka_headers_destroy(h);
        return e;
}

static enum replay_rc reproduce(const struct config *cfg, const struct replay_opts *o, char *err,
                                size_t errsz)
{
        static const char *const consumer_extra[] = {"group.id", REPRODUCE_GROUP, "enable.auto.commit", "false",
                                                     "enable.auto.offset.store", "false",
                                                     "enable.partition.eof", "true", "auto.offset.reset",
                                                     "error", NULL};
        /* Idempotent with acks=all: a retry inside the producer never adds a
         * third copy; the copy itself is the point. */
        static const char *const producer_extra[] = {"enable.idempotence", "true", "acks", "all",
                                                     "linger.ms", "5", NULL};
        struct part *ps = NULL;
        size_t n = 0, open_parts = 0, ranges;
        rd_kafka_t *c = NULL, *p = NULL;
        rd_kafka_conf_t *conf = NULL;
        rd_kafka_topic_partition_list_t *l = NULL;
        int64_t *at = NULL, total = 0, produced = 0, start = log_now_ms(), last_activity;
        struct acks acks = {0};
        struct progress pr;
        enum replay_rc rc;

        if (!(conf = kafka_conf(cfg, KAFKA_ROLE_CLIENT, consumer_extra, err, errsz)))
                return REPLAY_USAGE;
        if (!(c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, errsz))) {
                rd_kafka_conf_destroy(conf);
                return REPLAY_USAGE;
        }
        /* conf is now owned by c */
        if ((rc = read_partitions(c, o, &ps, &n, err, errsz)))
                goto out;
        rc = REPLAY_FAILED;
        if (!(at = calloc(n ? n : 1, sizeof(*at)))) {
                snprintf(err, errsz, "out of memory");
                goto out;
        }
        rc = REPLAY_USAGE;
        for (size_t i = 0; i < n; i++) {
                ps[i].from = o->from_offset >= 0 ? o->from_offset : ps[i].lo;
                ps[i].to = o->to_offset >= 0 ? o->to_offset : ps[i].hi;
        }
        if (o->from_time_ms >= 0) {
                if (offsets_at(c, o->topic, ps, n, o->from_time_ms, at, err, errsz))
                        goto out;
                for (size_t i = 0; i < n; i++)
                        ps[i].from = at[i];
        }
        if (o->to_time_ms >= 0) {
                if (offsets_at(c, o->topic, ps, n, o->to_time_ms, at, err, errsz))
                        goto out;
                for (size_t i = 0; i < n; i++)
                        ps[i].to = at[i];
        }
        char from[40] = "", to[40] = "";
        if (o->from_time_ms >= 0)
                fmt_time(o->from_time_ms, from, sizeof(from));
        if (o->to_time_ms >= 0)
                fmt_time(o->to_time_ms, to, sizeof(to));
        printf("topic %s: produce again (key, value, headers, same partition)%s%s%s%s\n", o->topic,
               *from ? ", from " : "", from, *to ? ", until " : "", to);
        printf("%9s %10s %10s %10s %10s %10s\n", "partition", "low", "high", "from", "to", "records");
        for (size_t i = 0; i < n; i++) {
                struct part *q = &ps[i];
                int bad_from = q->from < q->lo || q->from > q->hi;
                if (bad_from || q->to < q->lo || q->to > q->hi) {
                        snprintf(err, errsz, "offset %" PRId64 " is outside partition %s/%d, which holds %" PRId64
                                             "..%" PRId64,
                                 bad_from ? q->from : q->to, o->topic, (int)q->id, q->lo, q->hi);
                        goto out;
                }
                if (q->to < q->from)
                        q->to = q->from; /* an empty range */
                printf("%9d %10" PRId64 " %10" PRId64 " %10" PRId64 " %10" PRId64 " %10" PRId64 "\n", (int)q->id,
                       q->lo, q->hi, q->from, q->to, q->to - q->from);
                total += q->to - q->from;
        }
        if (o->dry_run) {
                printf("dry run: nothing produced (%" PRId64 " records would be produced again)\n", total);
                rc = REPLAY_OK;
                goto out;
        }

        rc = REPLAY_FAILED;
        if (!(conf = kafka_conf(cfg, KAFKA_ROLE_CLIENT, producer_extra, err, errsz)))
                goto out;
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_conf_set_opaque(conf, &acks);
        if (!(p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, errsz))) {
                rd_kafka_conf_destroy(conf);
                goto out;
        }
        /* conf is now owned by p */
        l = rd_kafka_topic_partition_list_new((int)n);
        for (size_t i = 0; i < n; i++) {
                if (ps[i].to > ps[i].from) {
                        rd_kafka_topic_partition_list_add(l, o->topic, ps[i].id)->offset = ps[i].from;
                        open_parts++;
                } else {
                        ps[i].done = 1;
                }
        }
        ranges = open_parts;
        rd_kafka_resp_err_t e = rd_kafka_assign(c, l);
        if (e) {
                snprintf(err, errsz, "reading %s: %s", o->topic, rd_kafka_err2str(e));
                goto out;
        }
        progress_start(&pr, "reproduce", "records acknowledged", total);
        last_activity = log_now_ms();
        while (open_parts > 0) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 100);
                int64_t acked = acks.delivered + acks.failed;
                rd_kafka_poll(p, 0);
                if (acks.delivered + acks.failed != acked)
                        last_activity = log_now_ms();
                progress_show(&pr, acks.delivered, produced, 0);
                if (!m) {
                        if (log_now_ms() - last_activity > STALL_MS) {
                                snprintf(err, errsz, "no records arrived for %d s (%" PRId64 " of %" PRId64
                                                     " produced again)",
                                         STALL_MS / 1000, produced, total);
                                goto out;
                        }
                        continue;
                }
                last_activity = log_now_ms();
                struct part *q = find_part(ps, n, m->partition);
                if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        snprintf(err, errsz, "reading %s/%d: %s", o->topic, (int)m->partition,
                                 rd_kafka_message_errstr(m));
                        rd_kafka_message_destroy(m);
                        goto out;
                }
                if (q && !q->done && !m->err && m->offset < q->to) {
                        if ((e = produce_again(p, o->topic, m))) {
                                snprintf(err, errsz, "producing to %s/%d: %s", o->topic, (int)m->partition,
                                         rd_kafka_err2str(e));
                                rd_kafka_message_destroy(m);
                                goto out;
                        }
                        produced++;
                }
                /* Done at the range's last record, or at the end of the partition
                 * (records inside the range may be gone: compaction, markers). */
                if (q && !q->done && m->offset + (m->err ? 0 : 1) >= q->to) {
                        rd_kafka_topic_partition_list_t *one = rd_kafka_topic_partition_list_new(1);
                        rd_kafka_topic_partition_list_add(one, o->topic, q->id);
                        rd_kafka_pause_partitions(c, one);
                        rd_kafka_topic_partition_list_destroy(one);
                        q->done = 1;
                        open_parts--;
                }
                rd_kafka_message_destroy(m);
        }
        /* Every acknowledgement, or a stall. */
        while (rd_kafka_outq_len(p) > 0) {
                int64_t acked = acks.delivered + acks.failed;
                rd_kafka_poll(p, 100);
                if (acks.delivered + acks.failed != acked)
                        last_activity = log_now_ms();
                progress_show(&pr, acks.delivered, produced, 0);
                if (log_now_ms() - last_activity > STALL_MS) {
                        snprintf(err, errsz, "%d records not acknowledged after %d s", rd_kafka_outq_len(p),
                                 STALL_MS / 1000);
                        goto out;
                }
        }
        progress_show(&pr, acks.delivered, produced, 1);
        if (acks.failed || acks.delivered != produced) {
                snprintf(err, errsz, "%" PRId64 " of %" PRId64 " records were not acknowledged (%s)",
                         produced - acks.delivered, produced, acks.failed ? acks.first_error : "lost");
                goto out;
        }
        printf("produced %" PRId64 " records again into %zu partition%s of %s, every one acknowledged "
               "(%.1f s)\n",
               produced, ranges, ranges == 1 ? "" : "s", o->topic, (double)(log_now_ms() - start) / 1000.0);
        rc = REPLAY_OK;
out:
        if (l)
                rd_kafka_topic_partition_list_destroy(l);
        if (p) {
                rd_kafka_flush(p, 5000);
                rd_kafka_destroy(p);
        }
        if (c) {
                rd_kafka_consumer_close(c);
                rd_kafka_destroy(c);
        }
        free(at);
        free(ps);
        return rc;
}

enum replay_rc replay_run(const struct config *cfg, const struct replay_opts *o, char *err,
                          size_t errsz)
{
        return o->reproduce ? reproduce(cfg, o, err, errsz) : reset(cfg, o, err, errsz);
}
