/* msgid: the identity of an outbox message — derived from its namespace, its key and its place among what that key's message produced, never from a sequence. */
#ifndef DEDUPD_BASE_MSGID_H
#define DEDUPD_BASE_MSGID_H

#include <stddef.h>
#include <stdint.h>

/** Lowercase hex of a SHA-256: ASCII, fits every broker's id field. */
#define MSGID_LEN 64
/** The longest id read back from dedupd.outbox.msg_id (its CHECK) that a
 *  broker is handed: AMQP's shortstr takes 255 bytes. */
#define MSGID_MAX 200

/** Which of a message's outputs an outbox row is. */
enum msgid_slot {
        MSGID_REPLY,           /* the reply to the delivery that applied the key */
        MSGID_DUPLICATE_REPLY, /* the reply to a duplicate: one per delivery */
        MSGID_EMIT,            /* the handler's emit number .ordinal, 0.. in call order */
};

/** Where an outbox row sits among the outputs of its key. */
struct msgid_place {
        enum msgid_slot slot;
        int ordinal;       /* MSGID_EMIT */
        const char *topic; /* MSGID_DUPLICATE_REPLY: the delivery answered */
        int32_t partition;
        int64_t offset;
};

/**
 * The id of the outbox row at place p of key in namespace ns (the key as
 * stored in dedupd.keys.idem_key): lowercase hex of SHA-256 over
 * "dedupd.outbox.v1", ns, key and the place, each ended by a NUL byte — the
 * same for the same inputs in every process, after a replay and after a
 * failover. out gets MSGID_LEN characters and a NUL.
 */
void msgid_derive(const char *ns, const char *key, const struct msgid_place *p, char out[MSGID_LEN + 1]);

/** 1 when s may go out as a message id: 1..MSGID_MAX printable ASCII
 *  characters, no space (a header value, Nats-Msg-Id, AMQP message_id). */
int msgid_valid(const char *s);

#endif
