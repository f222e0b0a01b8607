/* replication: what the database says about how its commits reach a standby — whether a failover can lose acknowledged commits. */
#ifndef DEDUPD_PG_REPLICATION_H
#define DEDUPD_PG_REPLICATION_H

#include <stddef.h>

#include "pg/store.h"

/*
 * A source that can be moved back (Kafka, NATS) re-reads its positions from
 * the database after a failover and re-applies what the promoted server
 * lost. One that cannot (RabbitMQ: an acknowledged message is gone) is safe
 * only when no commit is acknowledged before a standby has it: synchronous
 * replication, as this session sees it.
 */
struct store_replication {
        char synchronous_commit[32];         /* this session's synchronous_commit */
        char synchronous_standby_names[256]; /* the server's (empty: no synchronous standby) */
        int in_recovery;                     /* 1: a standby (dedupd cannot write there) */
};

/** Read what this session's commits wait for. */
enum store_rc store_replication_read(struct store *s, struct store_replication *out, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** 1 when a commit is acknowledged only once a synchronous standby has it;
 *  else 0 and why, in words ("synchronous_standby_names is empty"). */
int replication_sync(const struct store_replication *r, char *why, size_t whysz);

/** The advice that follows a warning: what to set for a safe failover. */
#define REPLICATION_ADVICE                                                                                             \
        "a failover to a standby that had not received the last commits loses those messages' effects for "            \
        "good, because RabbitMQ cannot redeliver what was acknowledged; set synchronous_standby_names on the "         \
        "primary and synchronous_commit = on (or remote_apply) for dedupd's role (docs/operating.md: Database "        \
        "failover)"

#endif
