/* replay: Kafka's replay — the group moved back (its committed offsets and dedupd.offsets together) or a range re-produced. */
#include "source/kafka/replay.h"

#include "base/mem.h"

#include <ctype.h>
#include <errno.h>
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

#define STALL_MS 60000                       /* no record and no acknowledgement for this long: give up */
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
        fprintf(stderr, "%s%s: %" PRId64 "/%" PRId64 " %s%s (%d%%), %.0f/s, ETA %s%s", p->tty ? "\r" : "", p->what,
                done, p->total, p->unit, extra, p->total ? (int)(done * 100 / p->total) : 100, rate, eta,
                p->tty ? "\033[K" : "\n");
        if (p->tty && final)
                fputc('\n', stderr);
        fflush(stderr);
        p->drawn = 1;
}

/* ---- where things are --------------------------------------------------------- */

/* The selected partitions of o->topic with their watermarks. */
static enum replay_rc read_partitions(rd_kafka_t *rk, const struct replay_opts *o, struct part **out, size_t *cnt,
                                      char *err, size_t errsz)
{
        struct progress pr;
        struct part *ps;
        int total = kafka_partition_count(rk, o->topic, err, errsz);
        size_t n;

        if (total < 0)
                return REPLAY_USAGE;
        n = o->partitions ? o->partition_cnt : (size_t)total;
        ps = xcalloc(n ? n : 1, sizeof(*ps));
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
                rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, o->topic, ps[i].id, &ps[i].lo, &ps[i].hi,
                                                                         KAFKA_TIMEOUT_MS);
                if (e) {
                        snprintf(err, errsz, "watermarks of %s/%d: %s", o->topic, (int)ps[i].id, rd_kafka_err2str(e));
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
static int offsets_at(rd_kafka_t *rk, const char *topic, const struct part *ps, size_t n, int64_t ts_ms, int64_t *out,
                      char *err, size_t errsz)
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

static int read_committed(rd_kafka_t *rk, const char *topic, struct part *ps, size_t n, char *err, size_t errsz)
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

static int read_db_offsets(struct store *st, const char *ns, const char *topic, struct part *ps, size_t n, char *err,
                           size_t errsz)
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
static enum replay_rc alter_offsets(rd_kafka_t *rk, const char *group, const char *topic, const struct part *ps,
                                    size_t n, char *err, size_t errsz)
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
                        snprintf(err, errsz,
                                 "group %s has active members (the broker refused the commit: %s); "
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

/* One reset: the group's partitions of the topic and where each goes. */
struct reset {
        const struct config *cfg;
        const struct replay_opts *o;
        const char *group;
        rd_kafka_t *rk;
        struct store *s;
        struct part *ps;
        size_t n;
        int64_t *at; /* --to-time: each partition's first offset at or after it */
        int64_t again, skipped;
};

/* Where each partition goes: the beginning, an offset, or the first record at a time. */
static enum replay_rc reset_targets(struct reset *x, char *err, size_t errsz)
{
        const struct replay_opts *o = x->o;
        if (o->to_time_ms >= 0) {
                x->at = xcalloc(x->n ? x->n : 1, sizeof(*x->at));
                if (offsets_at(x->rk, o->topic, x->ps, x->n, o->to_time_ms, x->at, err, errsz))
                        return REPLAY_USAGE;
        }
        for (size_t i = 0; i < x->n; i++) {
                struct part *p = &x->ps[i];
                p->to = o->to_beginning ? p->lo : x->at ? x->at[i] : o->to_offset;
                if (p->to < p->lo || p->to > p->hi) {
                        snprintf(err, errsz,
                                 "offset %" PRId64 " is outside partition %s/%d, which holds %" PRId64 "..%" PRId64,
                                 p->to, o->topic, (int)p->id, p->lo, p->hi);
                        return REPLAY_USAGE;
                }
        }
        return REPLAY_OK;
}

/* The plan, per partition: where Kafka and dedupd are, where they go, how
 * many records come again. */
static void reset_print(struct reset *x)
{
        const struct replay_opts *o = x->o;
        char target[64];
        if (o->to_beginning)
                snprintf(target, sizeof(target), "the beginning");
        else if (x->at)
                fmt_time(o->to_time_ms, target, sizeof(target));
        else
                snprintf(target, sizeof(target), "offset %" PRId64, o->to_offset);
        printf("group %s, namespace %s, topic %s: reset to %s\n", x->group, x->cfg->namespace, o->topic, target);
        printf("%9s %10s %10s %10s %10s %10s %12s\n", "partition", "low", "high", "kafka", "dedupd", "new",
               "redelivered");
        for (size_t i = 0; i < x->n; i++) {
                const struct part *p = &x->ps[i];
                int64_t cur = current_of(p);
                printf("%9d", (int)p->id);
                print_pos(p->lo);
                print_pos(p->hi);
                print_pos(p->committed);
                print_pos(p->db);
                print_pos(p->to);
                if (p->to <= cur) {
                        printf(" %12" PRId64 "\n", cur - p->to);
                        x->again += cur - p->to;
                } else {
                        printf(" %12s\n", "(skips)");
                        x->skipped += p->to - cur;
                }
        }
        if (x->skipped)
                printf("warning: moving forward skips %" PRId64 " records that were never processed\n", x->skipped);
}

/*
 * Order: the database first, committed last. The new positions are written
 * inside an open transaction, Kafka's offsets are moved, and only when the
 * broker accepted them is the transaction committed.
 *  - Kafka refuses (active members) or fails: ROLLBACK, nothing moved.
 *  - COMMIT fails after Kafka moved: Kafka is behind the table, which is what
 *    dedupd's invariant already allows (Kafka is never ahead of the
 *    database); dedupd starts from the table, so no replay happens and
 *    running the command again finishes it.
 * The other order could leave the table moved and Kafka not: dedupd would
 * replay (the table is authoritative) while Kafka's committed offsets sit
 * ahead of the database, which monitoring reads as done.
 */
static enum replay_rc reset_move(struct reset *x, char *err, size_t errsz)
{
        int32_t ids[x->n ? x->n : 1];
        int64_t to[x->n ? x->n : 1];
        char tmp[512];
        enum replay_rc rc;

        for (size_t i = 0; i < x->n; i++) {
                ids[i] = x->ps[i].id;
                to[i] = x->ps[i].to;
        }
        if (store_migrate(x->s, err, errsz) || store_begin(x->s, err, errsz))
                return REPLAY_FAILED;
        if (store_offsets_set(x->s, x->cfg->namespace, x->o->topic, x->n, ids, to, tmp, sizeof(tmp))) {
                snprintf(err, errsz, "updating dedupd.offsets: %s", tmp);
                return REPLAY_FAILED;
        }
        if ((rc = alter_offsets(x->rk, x->group, x->o->topic, x->ps, x->n, err, errsz)))
                return rc;
        if (store_commit(x->s, tmp, sizeof(tmp)) != STORE_OK) {
                snprintf(err, errsz,
                         "Kafka's committed offsets were moved but the database's were not (%s); "
                         "dedupd starts from the database, so nothing will be replayed: run the "
                         "command again",
                         tmp);
                return REPLAY_FAILED;
        }
        return REPLAY_OK;
}

/* Read everything the reset depends on: partitions, targets, both positions. */
static enum replay_rc reset_prepare(struct reset *x, char *err, size_t errsz)
{
        enum replay_rc rc;
        if (!(x->rk = kafka_client(x->cfg, RD_KAFKA_CONSUMER, KAFKA_ROLE_CLIENT, x->group, err, errsz)))
                return REPLAY_USAGE;
        if ((rc = read_partitions(x->rk, x->o, &x->ps, &x->n, err, errsz)) || (rc = reset_targets(x, err, errsz)))
                return rc;
        if (read_committed(x->rk, x->o->topic, x->ps, x->n, err, errsz))
                return REPLAY_FAILED;
        if (!(x->s = store_open(x->cfg->pg_conninfo, err, errsz)))
                return REPLAY_USAGE;
        if (read_db_offsets(x->s, x->cfg->namespace, x->o->topic, x->ps, x->n, err, errsz))
                return REPLAY_FAILED;
        return REPLAY_OK;
}

static enum replay_rc reset(const struct config *cfg, const struct replay_opts *o, char *err, size_t errsz)
{
        struct reset x = {.cfg = cfg, .o = o, .group = kafka_property(cfg, "group.id")};
        int64_t start = log_now_ms();
        enum replay_rc rc;

        if (!config_topic(cfg, o->topic)) {
                snprintf(err, errsz, "topic %s is not in %s: dedupd does not consume it", o->topic, cfg->path);
                return REPLAY_USAGE;
        }
        if (!x.group) {
                snprintf(err, errsz, "the config sets no kafka group.id");
                return REPLAY_USAGE;
        }
        if ((rc = reset_prepare(&x, err, errsz)))
                goto out;
        rc = REPLAY_FAILED;
        int active = group_active(x.rk, x.group, err, errsz);
        if (active == 1 && !o->dry_run)
                goto out; /* REPLAY_FAILED with the reason */
        if (active < 0)
                log_warn("replay", "%s; relying on the broker to refuse a commit while the group has members", err);
        reset_print(&x);
        if (active == 1)
                goto out; /* a dry run shows the plan, then the refusal a real run would meet */
        if (o->dry_run) {
                printf("dry run: nothing changed (%" PRId64 " records would be delivered again)\n", x.again);
                rc = REPLAY_OK;
                goto out;
        }
        if ((rc = reset_move(&x, err, errsz)))
                goto out;
        printf("reset %zu partition%s of %s for group %s: %" PRId64 " records will be delivered again (%.1f s)\n", x.n,
               x.n == 1 ? "" : "s", o->topic, x.group, x.again, (double)(log_now_ms() - start) / 1000.0);
out:
        if (x.s)
                store_rollback(x.s); /* a no-op after COMMIT */
        store_free(x.s);
        free(x.at);
        free(x.ps);
        if (x.rk)
                rd_kafka_destroy(x.rk);
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
                                      RD_KAFKA_V_VALUE(m->payload, m->len), RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
                if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                        rd_kafka_poll(p, 50);
        } while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL);
        if (e)
                rd_kafka_headers_destroy(h);
        return e;
}

/* One reproduction: a consumer reading each range, a producer writing it again. */
struct repro {
        const struct config *cfg;
        const struct replay_opts *o;
        rd_kafka_t *c, *p;
        struct part *ps;
        size_t n, open_parts, ranges;
        int64_t total, produced, last_activity;
        struct acks acks;
        struct progress pr;
};

static enum replay_rc repro_consumer(struct repro *x, char *err, size_t errsz)
{
        static const char *const extra[] = {"group.id",
                                            REPRODUCE_GROUP,
                                            "enable.auto.commit",
                                            "false",
                                            "enable.auto.offset.store",
                                            "false",
                                            "enable.partition.eof",
                                            "true",
                                            "auto.offset.reset",
                                            "error",
                                            NULL};
        rd_kafka_conf_t *conf = kafka_conf(x->cfg, KAFKA_ROLE_CLIENT, extra, err, errsz);
        if (!conf)
                return REPLAY_USAGE;
        if (!(x->c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, errsz))) {
                rd_kafka_conf_destroy(conf);
                return REPLAY_USAGE;
        }
        return REPLAY_OK; /* conf is now owned by c */
}

/* Idempotent with acks=all: a retry inside the producer never adds a third
 * copy; the copy itself is the point. */
static enum replay_rc repro_producer(struct repro *x, char *err, size_t errsz)
{
        static const char *const extra[] = {"enable.idempotence", "true", "acks", "all", "linger.ms", "5", NULL};
        rd_kafka_conf_t *conf = kafka_conf(x->cfg, KAFKA_ROLE_CLIENT, extra, err, errsz);
        if (!conf)
                return REPLAY_FAILED;
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_conf_set_opaque(conf, &x->acks);
        if (!(x->p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, errsz))) {
                rd_kafka_conf_destroy(conf);
                return REPLAY_FAILED;
        }
        return REPLAY_OK; /* conf is now owned by p */
}

/* [from, to) of each partition, from offsets or times. */
static enum replay_rc repro_ranges(struct repro *x, char *err, size_t errsz)
{
        const struct replay_opts *o = x->o;
        int64_t *at = xcalloc(x->n ? x->n : 1, sizeof(*at));
        enum replay_rc rc = REPLAY_USAGE;
        for (size_t i = 0; i < x->n; i++) {
                x->ps[i].from = o->from_offset >= 0 ? o->from_offset : x->ps[i].lo;
                x->ps[i].to = o->to_offset >= 0 ? o->to_offset : x->ps[i].hi;
        }
        if (o->from_time_ms >= 0) {
                if (offsets_at(x->c, o->topic, x->ps, x->n, o->from_time_ms, at, err, errsz))
                        goto out;
                for (size_t i = 0; i < x->n; i++)
                        x->ps[i].from = at[i];
        }
        if (o->to_time_ms >= 0) {
                if (offsets_at(x->c, o->topic, x->ps, x->n, o->to_time_ms, at, err, errsz))
                        goto out;
                for (size_t i = 0; i < x->n; i++)
                        x->ps[i].to = at[i];
        }
        rc = REPLAY_OK;
out:
        free(at);
        return rc;
}

/* The plan per partition; a range outside what the partition holds is refused. */
static enum replay_rc repro_print(struct repro *x, char *err, size_t errsz)
{
        const struct replay_opts *o = x->o;
        char from[40] = "", to[40] = "";
        if (o->from_time_ms >= 0)
                fmt_time(o->from_time_ms, from, sizeof(from));
        if (o->to_time_ms >= 0)
                fmt_time(o->to_time_ms, to, sizeof(to));
        printf("topic %s: produce again (key, value, headers, same partition)%s%s%s%s\n", o->topic,
               *from ? ", from " : "", from, *to ? ", until " : "", to);
        printf("%9s %10s %10s %10s %10s %10s\n", "partition", "low", "high", "from", "to", "records");
        for (size_t i = 0; i < x->n; i++) {
                struct part *q = &x->ps[i];
                int bad_from = q->from < q->lo || q->from > q->hi;
                if (bad_from || q->to < q->lo || q->to > q->hi) {
                        snprintf(err, errsz,
                                 "offset %" PRId64 " is outside partition %s/%d, which holds %" PRId64 "..%" PRId64,
                                 bad_from ? q->from : q->to, o->topic, (int)q->id, q->lo, q->hi);
                        return REPLAY_USAGE;
                }
                if (q->to < q->from)
                        q->to = q->from; /* an empty range */
                printf("%9d %10" PRId64 " %10" PRId64 " %10" PRId64 " %10" PRId64 " %10" PRId64 "\n", (int)q->id, q->lo,
                       q->hi, q->from, q->to, q->to - q->from);
                x->total += q->to - q->from;
        }
        return REPLAY_OK;
}

/* Read from each range's start; empty ranges are done already. */
static enum replay_rc repro_assign(struct repro *x, char *err, size_t errsz)
{
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)x->n);
        for (size_t i = 0; i < x->n; i++) {
                if (x->ps[i].to > x->ps[i].from) {
                        rd_kafka_topic_partition_list_add(l, x->o->topic, x->ps[i].id)->offset = x->ps[i].from;
                        x->open_parts++;
                } else {
                        x->ps[i].done = 1;
                }
        }
        x->ranges = x->open_parts;
        rd_kafka_resp_err_t e = rd_kafka_assign(x->c, l);
        rd_kafka_topic_partition_list_destroy(l);
        if (e) {
                snprintf(err, errsz, "reading %s: %s", x->o->topic, rd_kafka_err2str(e));
                return REPLAY_FAILED;
        }
        return REPLAY_OK;
}

/* One record read: produced again when in its range; its partition done at
 * the range's last record or at the partition's end (records inside the
 * range may be gone: compaction, markers). */
static enum replay_rc repro_one(struct repro *x, rd_kafka_message_t *m, char *err, size_t errsz)
{
        const char *topic = x->o->topic;
        struct part *q = find_part(x->ps, x->n, m->partition);
        rd_kafka_resp_err_t e;
        if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                snprintf(err, errsz, "reading %s/%d: %s", topic, (int)m->partition, rd_kafka_message_errstr(m));
                return REPLAY_FAILED;
        }
        if (q && !q->done && !m->err && m->offset < q->to) {
                if ((e = produce_again(x->p, topic, m))) {
                        snprintf(err, errsz, "producing to %s/%d: %s", topic, (int)m->partition, rd_kafka_err2str(e));
                        return REPLAY_FAILED;
                }
                x->produced++;
        }
        if (q && !q->done && m->offset + (m->err ? 0 : 1) >= q->to) {
                rd_kafka_topic_partition_list_t *one = rd_kafka_topic_partition_list_new(1);
                rd_kafka_topic_partition_list_add(one, topic, q->id);
                rd_kafka_pause_partitions(x->c, one);
                rd_kafka_topic_partition_list_destroy(one);
                q->done = 1;
                x->open_parts--;
        }
        return REPLAY_OK;
}

/* An acknowledgement counts as activity: the stall clock starts again. */
static void repro_poll(struct repro *x, int timeout_ms)
{
        int64_t acked = x->acks.delivered + x->acks.failed;
        rd_kafka_poll(x->p, timeout_ms);
        if (x->acks.delivered + x->acks.failed != acked)
                x->last_activity = log_now_ms();
        progress_show(&x->pr, x->acks.delivered, x->produced, 0);
}

/* Every range read and produced again, then every acknowledgement, or a stall. */
static enum replay_rc repro_copy(struct repro *x, char *err, size_t errsz)
{
        x->last_activity = log_now_ms();
        while (x->open_parts > 0) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(x->c, 100);
                repro_poll(x, 0);
                if (!m) {
                        if (log_now_ms() - x->last_activity <= STALL_MS)
                                continue;
                        snprintf(err, errsz, "no records arrived for %d s (%" PRId64 " of %" PRId64 " produced again)",
                                 STALL_MS / 1000, x->produced, x->total);
                        return REPLAY_FAILED;
                }
                x->last_activity = log_now_ms();
                enum replay_rc rc = repro_one(x, m, err, errsz);
                rd_kafka_message_destroy(m);
                if (rc)
                        return rc;
        }
        while (rd_kafka_outq_len(x->p) > 0) {
                repro_poll(x, 100);
                if (log_now_ms() - x->last_activity > STALL_MS) {
                        snprintf(err, errsz, "%d records not acknowledged after %d s", rd_kafka_outq_len(x->p),
                                 STALL_MS / 1000);
                        return REPLAY_FAILED;
                }
        }
        progress_show(&x->pr, x->acks.delivered, x->produced, 1);
        if (x->acks.failed || x->acks.delivered != x->produced) {
                snprintf(err, errsz, "%" PRId64 " of %" PRId64 " records were not acknowledged (%s)",
                         x->produced - x->acks.delivered, x->produced, x->acks.failed ? x->acks.first_error : "lost");
                return REPLAY_FAILED;
        }
        return REPLAY_OK;
}

static enum replay_rc reproduce(const struct config *cfg, const struct replay_opts *o, char *err, size_t errsz)
{
        struct repro x = {.cfg = cfg, .o = o};
        int64_t start = log_now_ms();
        enum replay_rc rc;

        if ((rc = repro_consumer(&x, err, errsz)) || (rc = read_partitions(x.c, o, &x.ps, &x.n, err, errsz)) ||
            (rc = repro_ranges(&x, err, errsz)) || (rc = repro_print(&x, err, errsz)))
                goto out;
        if (o->dry_run) {
                printf("dry run: nothing produced (%" PRId64 " records would be produced again)\n", x.total);
                goto out;
        }
        if ((rc = repro_producer(&x, err, errsz)) || (rc = repro_assign(&x, err, errsz)))
                goto out;
        progress_start(&x.pr, "reproduce", "records acknowledged", x.total);
        if ((rc = repro_copy(&x, err, errsz)))
                goto out;
        printf("produced %" PRId64 " records again into %zu partition%s of %s, every one acknowledged (%.1f s)\n",
               x.produced, x.ranges, x.ranges == 1 ? "" : "s", o->topic, (double)(log_now_ms() - start) / 1000.0);
out:
        if (x.p) {
                rd_kafka_flush(x.p, 5000);
                rd_kafka_destroy(x.p);
        }
        if (x.c) {
                rd_kafka_consumer_close(x.c);
                rd_kafka_destroy(x.c);
        }
        free(x.ps);
        return rc;
}

enum replay_rc kafka_replay(const struct config *cfg, const struct replay_opts *o, char *err, size_t errsz)
{
        return o->reproduce ? reproduce(cfg, o, err, errsz) : reset(cfg, o, err, errsz);
}
