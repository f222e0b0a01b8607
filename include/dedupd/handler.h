/* dedupd handler ABI: the one header a handler author needs. */
#ifndef DEDUPD_HANDLER_H
#define DEDUPD_HANDLER_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Versioning (PostgreSQL's PG_MODULE_MAGIC is the model):
 *  - DEDUPD_HANDLER_ABI_MAJOR changes when an existing field changes meaning or
 *    moves; the host refuses a handler built against another major.
 *  - Fields are only ever appended to the descriptor and to the host table;
 *    `size` tells each side how much of the other's struct it may read.
 */
#define DEDUPD_HANDLER_ABI_MAJOR 1

/** The symbol every handler exports (see DEDUPD_HANDLER_EXPORT). */
#define DEDUPD_HANDLER_SYMBOL "dedupd_handler_descriptor"

/** Result of handling one message. 0 means OK. */
typedef enum dedupd_result {
        /** Effect applied; the key is recorded DONE with the response. */
        DEDUPD_OK = 0,
        /** Business rejection (e.g. insufficient balance): the message's
         *  changes are rolled back, the key is recorded FAILED with the
         *  error, the message is acknowledged, and every later duplicate
         *  gets the same rejection. */
        DEDUPD_REJECT = 1,
        /** Transient failure: the whole batch is rolled back and retried
         *  with backoff; after the topic's retry budget the message goes to
         *  the dead-letter topic. */
        DEDUPD_RETRY = 2,
} dedupd_result_t;

/** Log levels for host->log. */
enum dedupd_log_level {
        DEDUPD_LOG_ERROR = 3,
        DEDUPD_LOG_WARN  = 4,
        DEDUPD_LOG_INFO  = 6,
        DEDUPD_LOG_DEBUG = 7,
};

/** One Kafka header. value may be NULL (a null header). */
struct dedupd_header {
        const char *name;
        const void *value;
        size_t value_len;
};

/** One message, valid for the duration of the callback only. */
struct dedupd_msg {
        const char *topic;
        int32_t partition;
        int64_t offset;
        int64_t timestamp_ms; /**< -1 when the broker gave none */
        const void *key;      /**< Kafka message key, may be NULL */
        size_t key_len;
        const void *value;    /**< payload, may be NULL (tombstone) */
        size_t value_len;
        const struct dedupd_header *headers;
        size_t header_cnt;
        const char *idem_key; /**< the business idempotency key, NUL-terminated */
};

/** Opaque per-message context handed to handle(). */
struct dedupd_ctx;
/** Opaque context handed to init(). */
struct dedupd_init_ctx;

/**
 * Services the host offers a handler. The handler never links against
 * daemon symbols; it reaches the host only through this table.
 */
struct dedupd_host {
        uint32_t abi_major; /**< DEDUPD_HANDLER_ABI_MAJOR of the host */
        uint32_t size;      /**< sizeof(struct dedupd_host) of the host */

        /** Transactional mode: the connection whose transaction this message
         *  runs in; use it for every database effect, never COMMIT or
         *  ROLLBACK on it. External mode: the same connection in autocommit
         *  (no transaction joins the effect; use it for reads or your own
         *  bookkeeping). */
        PGconn *(*conn)(struct dedupd_ctx *ctx);
        /** The idempotency key of the message being handled. */
        const char *(*idem_key)(struct dedupd_ctx *ctx);
        /** Set the response (OK) or error (REJECT) stored with the key and
         *  returned to every later duplicate. Copied; last call wins. It is
         *  stored as text: cut at an embedded NUL; -1 (and nothing set) when
         *  it is not UTF-8 text. */
        int (*set_response)(struct dedupd_ctx *ctx, const char *data, size_t len);
        /** Log through the daemon's logger, prefixed with the handler's name. */
        void (*log)(struct dedupd_ctx *ctx, int level, const char *fmt, ...)
#if defined(__GNUC__)
                __attribute__((format(printf, 3, 4)))
#endif
                ;
        /** In init(): a scalar from the handler's `config:` subtree by dotted
         *  path ("accounts.initial_balance"), or NULL when absent. */
        const char *(*config_get)(struct dedupd_init_ctx *ictx, const char *path);
        /** In init(): a connection for one-time setup (creating tables);
         *  autocommit, not the per-batch transaction. */
        PGconn *(*init_conn)(struct dedupd_init_ctx *ictx);
        /** In init(): log (no message context yet). */
        void (*init_log)(struct dedupd_init_ctx *ictx, int level, const char *fmt, ...)
#if defined(__GNUC__)
                __attribute__((format(printf, 3, 4)))
#endif
                ;

        /* ---- appended in ABI 1: check host->size before use ---- */

        /** Emit a message (a reply, a follow-up event) through the outbox: it
         *  is written in this message's transaction and published after
         *  COMMIT by the relay, so it exists if and only if the effect
         *  committed. key and value may be NULL. Returns 0, or -1: in
         *  external mode (there is no transaction to join), or when the
         *  broker could never take it (topic not a legal name there, key or
         *  header names it cannot carry), nothing written. A
         *  handler using emit() must not set DEDUPD_HANDLER_F_CLEAN_REJECT
         *  unless it emits only when it returns DEDUPD_OK. */
        int (*emit)(struct dedupd_ctx *ctx, const char *topic, const void *key, size_t key_len,
                    const void *value, size_t value_len, const struct dedupd_header *headers,
                    size_t header_cnt);
};

/** 1 when the host table has field `member` (older hosts have a smaller table). */
#define DEDUPD_HOST_HAS(host, member)                                                          \
        ((host)->size >= offsetof(struct dedupd_host, member) + sizeof((host)->member))

/** Descriptor flags. */
enum dedupd_handler_flags {
        /** The handler makes no database change before it returns
         *  DEDUPD_REJECT (it rejects on a check, or its only write is the
         *  conditional one that failed). The host can then skip the
         *  per-message savepoint, which saves a round trip per message.
         *  If the transaction is found aborted anyway, the host falls back
         *  to savepoints for that batch. */
        DEDUPD_HANDLER_F_CLEAN_REJECT = 1u << 0,
        /** handle() and handle_batch() may run at the same time on several
         *  threads, each call on its own connection and transaction, with
         *  the one state init() returned: the handler keeps nothing mutable
         *  in that state or in globals without its own lock. dedupd runs
         *  partitions on several workers (`workers` > 1) only when every
         *  topic's handler declares this. */
        DEDUPD_HANDLER_F_CONCURRENT = 1u << 1,
};

/**
 * The descriptor a handler returns. Must begin with abi_major and size.
 */
struct dedupd_handler {
        uint32_t abi_major; /**< = DEDUPD_HANDLER_ABI_MAJOR */
        uint32_t size;      /**< = sizeof(struct dedupd_handler) */
        const char *name;   /**< short name used in logs */
        uint32_t flags;     /**< enum dedupd_handler_flags */

        /** Optional. Called once at start with the handler's own config.
         *  Return 0, or -1 with a message in errbuf (the daemon refuses to
         *  start). *state is passed back to every other callback. */
        int (*init)(const struct dedupd_host *host, struct dedupd_init_ctx *ictx,
                    void **state, char *errbuf, size_t errsz);

        /** Required. Apply one message's effect inside the host's
         *  transaction (host->conn(ctx)). */
        dedupd_result_t (*handle)(void *state, struct dedupd_ctx *ctx,
                                  const struct dedupd_msg *msg);

        /** Optional, set-oriented alternative to handle(): all fresh
         *  messages of a batch at once, in partition-offset order. Fill
         *  results[i] (and responses through host->set_response(ctxs[i],…)).
         *  A REJECT here must leave no change for that message. Returning
         *  DEDUPD_RETRY retries the whole batch; then results[] names the
         *  culprits: only messages left at DEDUPD_RETRY (the host fills
         *  results[] with it before the call) count an attempt toward
         *  retry.max_attempts, so set the others to DEDUPD_OK and one bad
         *  message is dead-lettered alone instead of with its batch. */
        dedupd_result_t (*handle_batch)(void *state, struct dedupd_ctx *const *ctxs,
                                        const struct dedupd_msg *const *msgs,
                                        size_t cnt, dedupd_result_t *results);

        /** Optional. Called once at shutdown. */
        void (*fini)(void *state);

        /* ---- appended in ABI 1: the host checks size before reading ---- */

        /** Optional. Where this handler's effects can be counted, for
         *  `dedupctl verify`: a table with one row per applied effect and a
         *  column holding its idempotency key (msg->idem_key). verify then
         *  names every key with two effects, every DONE key without one and
         *  every FAILED key with one. NULL: verify checks keys, counters and
         *  lag only. */
        const char *evidence_table;
        /** The key column of evidence_table; NULL: "idem_key". */
        const char *evidence_key_column;
};

/** Fills the descriptor's ABI fields (PostgreSQL's PG_MODULE_MAGIC is the
 *  model): begin every descriptor with it.
 *
 *     static const struct dedupd_handler h = {
 *             DEDUPD_HANDLER_MAGIC,
 *             .name = "transfer",
 *             .handle = my_handle,
 *     };
 *     DEDUPD_HANDLER_EXPORT(h)
 */
#define DEDUPD_HANDLER_MAGIC .abi_major = DEDUPD_HANDLER_ABI_MAJOR, .size = sizeof(struct dedupd_handler)

/** 1 when descriptor d has field `member` (a handler built against an older
 *  header has a smaller descriptor): the host's side of appended fields. */
#define DEDUPD_HANDLER_HAS(d, member)                                                          \
        ((d)->size >= offsetof(struct dedupd_handler, member) + sizeof((d)->member))

/** The exported function's type. */
typedef const struct dedupd_handler *(*dedupd_handler_fn)(void);

/** Export a descriptor (see DEDUPD_HANDLER_MAGIC). */
#define DEDUPD_HANDLER_EXPORT(desc)                                            \
        __attribute__((visibility("default"))) const struct dedupd_handler *  \
        dedupd_handler_descriptor(void);                                       \
        const struct dedupd_handler *dedupd_handler_descriptor(void)           \
        {                                                                      \
                return &(desc);                                                \
        }

#ifdef __cplusplus
}
#endif
#endif /* DEDUPD_HANDLER_H */
