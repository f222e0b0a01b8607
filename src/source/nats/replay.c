/* replay_nats: dedupctl replay for source: nats — a topic's JetStream consumer and its dedupd.offsets row moved back together. */
#include "source/nats/replay.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pg/offsets.h"
#include "pg/schema.h"
#include "pg/store.h"
#include "source/nats/consumers.h"
#include "source/nats/settings.h"

static int topic_index(const struct config *cfg, const char *name)
{
        for (size_t i = 0; i < cfg->topic_cnt; i++)
                if (!strcmp(cfg->topics[i].name, name))
                        return (int)i;
        return -1;
}

static enum replay_rc usage(const struct config *cfg, const struct replay_opts *o, char *err, size_t errsz)
{
        if (topic_index(cfg, o->topic) < 0) {
                snprintf(err, errsz, "topic %s is not in %s: dedupd does not consume it", o->topic, cfg->path);
                return REPLAY_USAGE;
        }
        if (o->reproduce) {
                snprintf(err, errsz,
                         "--reproduce publishes records again on Kafka only; with source: nats, move "
                         "the consumer back (--to-beginning, --to-offset SEQ or --to-time TIME)");
                return REPLAY_USAGE;
        }
        for (size_t i = 0; i < o->partition_cnt; i++)
                if (o->partitions[i] != 0) {
                        snprintf(err, errsz, "partition %d is out of range: a NATS subject is partition 0 only",
                                 (int)o->partitions[i]);
                        return REPLAY_USAGE;
                }
        return REPLAY_OK;
}

/* A dedupd pulling keeps a pull request waiting nearly all the time: looked
 * at a few times, any waiting request refuses the replay. */
static enum replay_rc refuse_if_pulled(struct nats_link *l, const struct config *cfg, size_t t,
                                       struct nats_consumer_state *st, char *err, size_t errsz)
{
        char name[256];
        nats_consumer_name(cfg, t, name, sizeof(name));
        for (int i = 0; i < 5; i++) {
                if (nats_consumer_state(l, cfg, t, st, err, errsz) != NATS_CHECK_OK)
                        return REPLAY_FAILED;
                if (st->waiting > 0) {
                        snprintf(err, errsz,
                                 "consumer %s of stream %s has %" PRId64 " pull request(s) waiting: a "
                                 "dedupd is consuming it; stop it first",
                                 name, nats_conf(cfg)->stream, st->waiting);
                        return REPLAY_FAILED;
                }
                usleep(50 * 1000);
        }
        return REPLAY_OK;
}

static void plan(const struct config *cfg, const struct replay_opts *o, size_t t, const struct nats_consumer_state *st,
                 int64_t db)
{
        char name[256], target[64];
        nats_consumer_name(cfg, t, name, sizeof(name));
        if (o->to_beginning)
                snprintf(target, sizeof(target), "the beginning");
        else if (o->to_offset >= 0)
                snprintf(target, sizeof(target), "stream sequence %" PRId64, o->to_offset);
        else
                snprintf(target, sizeof(target), "the first message at or after %" PRId64 " ms", o->to_time_ms);
        printf("stream %s, consumer %s, namespace %s, subject %s: reset to %s\n", nats_conf(cfg)->stream, name,
               cfg->namespace, o->topic, target);
        if (st->found)
                printf("  consumer: acknowledged up to %" PRIu64 ", delivered up to %" PRIu64 ", %" PRIu64 " pending\n",
                       st->ack_floor, st->delivered, st->pending);
        else
                printf("  consumer: none yet\n");
        if (db >= 0)
                printf("  dedupd.offsets: next sequence %" PRId64 "\n", db);
        else
                printf("  dedupd.offsets: no position\n");
}

/* dedupd.offsets first, inside a transaction; the consumer; then COMMIT. A
 * failed COMMIT leaves the consumer moved back: dedupd never starts past its
 * consumer's acknowledged floor, so the replay happens anyway. */
static enum replay_rc move(struct nats_link *l, struct store *s, const struct config *cfg, const struct replay_opts *o,
                           size_t t, char *err, size_t errsz)
{
        int32_t part = 0;
        int64_t first = 0;
        char tmp[512];
        int64_t start = o->to_beginning ? -1 : o->to_offset;
        if (o->to_time_ms >= 0 && nats_seq_at_time(l, cfg, o->to_time_ms, &start, err, errsz) != NATS_CHECK_OK)
                return REPLAY_FAILED;
        if (store_migrate(s, err, errsz) || store_begin(s, err, errsz))
                return REPLAY_FAILED;
        if (nats_consumer_reset(l, cfg, t, start, &first, err, errsz) != NATS_CHECK_OK)
                return REPLAY_FAILED;
        if (store_offsets_set(s, cfg->namespace, o->topic, 1, &part, &first, tmp, sizeof(tmp)) ||
            store_commit(s, tmp, sizeof(tmp)) != STORE_OK) {
                snprintf(err, errsz,
                         "the consumer was moved back to stream sequence %" PRId64 " but dedupd.offsets "
                         "was not (%s); dedupd replays from the consumer anyway",
                         first, tmp);
                return REPLAY_FAILED;
        }
        printf("reset consumer of %s: it delivers again from stream sequence %" PRId64 "\n", o->topic, first);
        return REPLAY_OK;
}

enum replay_rc nats_replay(const struct config *cfg, const struct replay_opts *o, char *err, size_t errsz)
{
        struct nats_link l;
        struct nats_consumer_state st;
        struct store *s = NULL;
        int32_t part = 0;
        int64_t db = -1;
        enum replay_rc rc = usage(cfg, o, err, errsz);
        size_t t = (size_t)topic_index(cfg, o->topic);
        if (rc)
                return rc;
        if (nats_link_open(&l, cfg, err, errsz))
                return REPLAY_USAGE;
        if (nats_stream_check(&l, cfg, NULL, err, errsz) != NATS_CHECK_OK) {
                rc = REPLAY_FAILED;
                goto out;
        }
        if (!(s = store_open(cfg->pg_conninfo, err, errsz))) {
                rc = REPLAY_USAGE;
                goto out;
        }
        if (store_offsets_get(s, cfg->namespace, o->topic, 1, &part, &db, err, errsz)) {
                rc = REPLAY_FAILED;
                goto out;
        }
        if ((rc = refuse_if_pulled(&l, cfg, t, &st, err, errsz))) {
                if (o->dry_run && st.waiting > 0)
                        plan(cfg, o, t, &st, db); /* the plan, then the refusal a real run would meet */
                goto out;
        }
        plan(cfg, o, t, &st, db);
        if (o->dry_run) {
                printf("dry run: nothing changed\n");
                goto out;
        }
        rc = move(&l, s, cfg, o, t, err, errsz);
out:
        if (s)
                store_rollback(s); /* a no-op after COMMIT */
        store_free(s);
        nats_link_close(&l);
        return rc;
}
