/* dedupd handler ABI: the one header a handler author needs. */
/*
 * A handler is a shared object exporting one descriptor (struct
 * dedupd_handler, below; DEDUPD_HANDLER_MAGIC and DEDUPD_HANDLER_EXPORT).
 * dedupd calls, for each topic that names it:
 *
 *   init(host, ictx, &state, errbuf, errsz)   once, at start and at
 *       `dedupctl migrate`: read the handler's `config:` (host->config_get),
 *       create its tables (host->ensure_schema), say where its effects are
 *       counted (host->set_evidence).
 *   handle(state, ctx, msg)                   once per new message, inside
 *       the batch's transaction: its effect through host->exec (or the
 *       connection host->conn), its response through host->set_response,
 *       and a dedupd_result_t. A duplicate never reaches the handler: it
 *       gets the first outcome.
 *   handle_batch(...)                          optionally instead of handle:
 *       every new message of a batch at once, for set-oriented SQL.
 *   fini(state)                                at shutdown.
 *
 * The host table (struct dedupd_host) is reached from every context with
 * DEDUPD_HOST(ctx). What the host hands out (messages, rows, contexts) is
 * valid until the callback returns; the host frees it. handlers/hello/hello.c
 * is a complete handler in 39 lines; docs/handlers.md is the guide.
 *
 * Build against the installed SDK:
 *   cc -shared -fPIC -fvisibility=hidden -o my.so my.c $(pkg-config --cflags --libs dedupd-handler)
 * or, with CMake: find_package(dedupd) and link dedupd::handler.
 */
#ifndef DEDUPD_HANDLER_H
#define DEDUPD_HANDLER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
/** The minor version of this header: 0 the first table, 1 emit() and the
 *  evidence fields, 2 exec() and its rows, set_evidence(), ensure_schema(),
 *  the host in every context and the handler's version, 3 reconcile(), 4 classify(). A handler built
 *  against an older minor loads unchanged; one that calls what a newer minor
 *  added checks DEDUPD_HOST_HAS(host, member) in init() (see
 *  DEDUPD_HOST_REQUIRE), since an older dedupd has a shorter table. */
#define DEDUPD_HANDLER_ABI_MINOR 4

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
        DEDUPD_LOG_WARN = 4,
        DEDUPD_LOG_INFO = 6,
        DEDUPD_LOG_DEBUG = 7,
};

/** One header of the message, whichever broker carried it (a Kafka record
 *  header, a NATS header, an AMQP message header). value may be NULL (a
 *  header without a value). */
struct dedupd_header {
        const char *name;
        const void *value;
        size_t value_len;
};

/** One message from whichever broker feeds the topic (a Kafka topic, a NATS
 *  JetStream subject, a RabbitMQ queue: `topic` is its name in the config),
 *  valid for the duration of the callback only. */
struct dedupd_msg {
        const char *topic;
        int32_t partition;    /**< the Kafka partition; 0 from NATS and RabbitMQ */
        int64_t offset;       /**< its place: the Kafka offset, the NATS stream sequence, or
                               *   RabbitMQ's count of deliveries on this connection (not stable
                               *   across redeliveries: never key on it) */
        int64_t timestamp_ms; /**< -1 when the broker gave none */
        const void *key;      /**< the message's key where its broker has one (a Kafka
                               *   record's); NULL when it has none (NATS, RabbitMQ) */
        size_t key_len;
        const void *value; /**< payload, may be NULL (tombstone) */
        size_t value_len;
        const struct dedupd_header *headers;
        size_t header_cnt;
        const char *idem_key; /**< the business idempotency key, NUL-terminated */
};

/** Opaque per-message context handed to handle() (and, one per message, to
 *  handle_batch()). Valid for the duration of the callback only. */
struct dedupd_ctx;
/** Opaque context handed to init(). Valid for the duration of init() only. */
struct dedupd_init_ctx;
/** The rows a statement returned (host->exec), owned by the host: read them
 *  with host->rows() and host->value() until the callback returns, then the
 *  host frees them. Never free or keep them. */
struct dedupd_rows;

/** What host->exec() and host->init_exec() return. OK, REJECT and RETRY have
 *  the values of the dedupd_result_t a handler returns, so a handler can
 *  return a failed exec()'s value as its result. */
enum dedupd_exec_rc {
        /** The statement ran (*rows holds what it returned). */
        DEDUPD_EXEC_OK = DEDUPD_OK,
        /** It violated a constraint (SQLSTATE class 23: a CHECK, a UNIQUE or
         *  foreign key, a NOT NULL): the message's input is refused. The
         *  response is set to "rejected: constraint NAME" (set your own
         *  afterwards with set_response; host->constraint(rows) names it).
         *  The transaction is aborted: return DEDUPD_REJECT and send no
         *  further statement; the host rolls the message back to its
         *  savepoint, so do not set DEDUPD_HANDLER_F_CLEAN_REJECT when you
         *  rely on this. */
        DEDUPD_EXEC_REJECT = DEDUPD_REJECT,
        /** Transient (connection lost, serialization failure, deadlock, lock
         *  not available): return DEDUPD_RETRY; the batch is rolled back and
         *  retried with backoff. A deadlock or serialization failure is
         *  charged to no message and does not split the batch (up to
         *  retry.max_attempts of them in a row). */
        DEDUPD_EXEC_RETRY = DEDUPD_RETRY,
        /** Anything else (a syntax error, a missing table, a value the
         *  column does not take): a bug or a poison message. Return it as
         *  is (or DEDUPD_RETRY): it counts one attempt of this message, and
         *  once retry.max_attempts are spent the message is dead-lettered. */
        DEDUPD_EXEC_FATAL = 3,
};

/**
 * Services the host offers a handler. The handler never links against
 * daemon symbols; it reaches the host only through this table: init() gets
 * it as an argument, and from ABI 1.2 every context leads to it
 * (DEDUPD_HOST(ctx)), so a handler keeps no pointer to it.
 *
 * Calls taking a struct dedupd_ctx are for handle() and handle_batch();
 * calls taking a struct dedupd_init_ctx for init() only.
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

        /* ---- appended in ABI 1.1: check host->size before use ---- */

        /** Emit a message (a reply, a follow-up event) through the outbox: it
         *  is written in this message's transaction and published after
         *  COMMIT by the relay, so it exists if and only if the effect
         *  committed. key and value may be NULL. Returns 0, or -1: in
         *  external mode (there is no transaction to join), or when the
         *  broker could never take it (topic not a legal name there, key or
         *  header names it cannot carry), nothing written. A
         *  handler using emit() must not set DEDUPD_HANDLER_F_CLEAN_REJECT
         *  unless it emits only when it returns DEDUPD_OK. */
        int (*emit)(struct dedupd_ctx *ctx, const char *topic, const void *key, size_t key_len, const void *value,
                    size_t value_len, const struct dedupd_header *headers, size_t header_cnt);

        /* ---- appended in ABI 1.2: check host->size before use ---- */

        /** Run one parameterised statement on the message's transaction (the
         *  connection host->conn gives): $1..$n are params[0..n-1], text, a
         *  NULL element an SQL NULL; never splice a message's bytes into sql.
         *  Returns an enum dedupd_exec_rc; a failure is logged once, with its
         *  SQLSTATE and the message's key (never the parameters). *rows (may
         *  be NULL when not wanted) is set on DEDUPD_EXEC_OK and on
         *  DEDUPD_EXEC_REJECT (for host->constraint), NULL otherwise. In
         *  handle_batch() every ctxs[i] is on the batch's one transaction:
         *  pass the one a statement is for (a failure's log names its key).
         *  In external mode the statement commits on its own (autocommit). */
        int (*exec)(struct dedupd_ctx *ctx, const char *sql, int nparams, const char *const *params,
                    struct dedupd_rows **rows);
        /** The number of rows the statement returned; for one without
         *  RETURNING, the rows it inserted, updated or deleted. 0 for NULL. */
        int (*rows)(const struct dedupd_rows *rows);
        /** A value of a returned row as text, or NULL: an SQL NULL, or a row
         *  or column that is not there. Valid until the callback returns. */
        const char *(*value)(const struct dedupd_rows *rows, int row, int col);
        /** The constraint a rejected statement violated, or NULL. */
        const char *(*constraint)(const struct dedupd_rows *rows);
        /** host->exec for init(): on the setup connection, in autocommit (each
         *  statement commits on its own). Its failures are logged and become
         *  init()'s error message when errbuf is left empty. */
        int (*init_exec)(struct dedupd_init_ctx *ictx, const char *sql, int nparams, const char *const *params,
                         struct dedupd_rows **rows);
        /** In init(): create this handler's tables when they are missing.
         *  probe is a query returning one row whose first column is true when
         *  the schema is there (e.g. "SELECT to_regclass('ledger') IS NOT
         *  NULL"); when it is not, ddl (one or more statements) runs in one
         *  transaction under an advisory lock named by name (instances
         *  starting together create it once), and the probe must then pass.
         *  A schema already there takes no lock at all. Returns 0, or -1
         *  (logged; init()'s error message when errbuf is left empty). */
        int (*ensure_schema)(struct dedupd_init_ctx *ictx, const char *name, const char *ddl, const char *probe);
        /** In init(): declare where `dedupctl verify` counts this topic's
         *  effects: table has one row per applied effect, key_column (NULL:
         *  "idem_key") the message's idempotency key (msg->idem_key). verify
         *  then names every key with two effects, every DONE key without one
         *  and every FAILED key with one. Stored in the database for verify
         *  (which runs in another process). table may be schema-qualified
         *  ("ledger.entries"); both are plain SQL identifiers. Returns 0, or
         *  -1 (logged): a name that is not an identifier, no database. */
        int (*set_evidence)(struct dedupd_init_ctx *ictx, const char *table, const char *key_column);

        /* ---- appended in ABI 1.4: check host->size before use ---- */

        /** A statement you ran yourself on host->conn (a pipeline, COPY)
         *  failed with res: judge it as exec() judges its own. It is logged
         *  once with its SQLSTATE and the message's key, and its class
         *  returned (an enum dedupd_exec_rc; DEDUPD_EXEC_OK for a result that
         *  did not fail; a constraint's response set as exec sets it). A
         *  deadlock or serialization failure then runs the batch again whole,
         *  charged to no message (up to retry.max_attempts in a row), as it
         *  does for exec(). res stays yours to PQclear. */
        int (*classify)(struct dedupd_ctx *ctx, const PGresult *res);
};

/** Every context begins with a pointer to the host table (ABI 1.2): the
 *  host from any struct dedupd_ctx or struct dedupd_init_ctx pointer, read
 *  as the context's initial member. Needs a host of ABI 1.2 or later. */
static inline const struct dedupd_host *dedupd_host_of(const void *ctx)
{
        return *(const struct dedupd_host *const *)ctx;
}
#define DEDUPD_HOST(ctx) dedupd_host_of(ctx)

/** 1 when the host table has field `member` (older hosts have a smaller table). */
#define DEDUPD_HOST_HAS(host, member) ((host)->size >= offsetof(struct dedupd_host, member) + sizeof((host)->member))

/** In init(): fail with a message in errbuf unless the host has `member`
 *  (a dedupd older than the header the handler was built against). */
#define DEDUPD_HOST_REQUIRE(host, member, errbuf, errsz)                                                               \
        do {                                                                                                           \
                if (!DEDUPD_HOST_HAS(host, member)) {                                                                  \
                        snprintf(errbuf, errsz,                                                                        \
                                 "this dedupd's handler API lacks %s(): "                                              \
                                 "upgrade dedupd to ABI %d.%d",                                                        \
                                 #member, DEDUPD_HANDLER_ABI_MAJOR, DEDUPD_HANDLER_ABI_MINOR);                         \
                        return -1;                                                                                     \
                }                                                                                                      \
        } while (0)

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

/** An in-doubt key as reconcile() sees it (ABI 1.3): external mode, its
 *  owner gone before it recorded an outcome. */
struct dedupd_in_doubt {
        const char *idem_key; /**< the key dedupd handed the downstream with the effect */
        const char *topic;
        int32_t partition;
        int64_t offset; /**< of the message that first claimed it */
        int attempts;   /**< how many times the effect may have been started */
        int reconciled; /**< how many earlier reconcile() calls could not tell */
};

/** What reconcile() learned from the downstream about an in-doubt key. */
typedef enum {
        /** Cannot tell now (the downstream is away, it does not know yet): the
         *  key stays EXPIRED and is asked again at the reaper's next round,
         *  up to external.reconcile_tries; its message meanwhile gets
         *  on_expired. */
        DEDUPD_RECONCILE_UNKNOWN = 0,
        /** The effect happened: the key becomes DONE (the response set with
         *  host->set_response, or "reconciled: done") and its messages are
         *  absorbed as duplicates. */
        DEDUPD_RECONCILE_DONE = 1,
        /** It did not happen and must not: FAILED, like a REJECT. */
        DEDUPD_RECONCILE_FAILED = 2,
        /** It did not happen: the key's next message runs the effect again
         *  (attempts + 1), once. */
        DEDUPD_RECONCILE_REEXECUTE = 3,
} dedupd_reconcile_t;

/**
 * The descriptor a handler returns. Must begin with abi_major and size.
 */
struct dedupd_handler {
        uint32_t abi_major; /**< = DEDUPD_HANDLER_ABI_MAJOR */
        uint32_t size;      /**< = sizeof(struct dedupd_handler) */
        const char *name;   /**< short name used in logs */
        uint32_t flags;     /**< enum dedupd_handler_flags */

        /** Optional. Called once at start with the handler's own config
         *  (host->config_get), and by `dedupctl migrate`: create tables
         *  (host->ensure_schema), declare the evidence (host->set_evidence).
         *  Return 0, or -1 with a message in errbuf (the daemon refuses to
         *  start); -1 with errbuf left empty right after a failed host call
         *  makes that call's reason the message. *state is passed back to
         *  every other callback. */
        int (*init)(const struct dedupd_host *host, struct dedupd_init_ctx *ictx, void **state, char *errbuf,
                    size_t errsz);

        /** Required unless handle_batch is given. Apply one message's effect
         *  inside the host's transaction (host->exec(ctx, ...), or the
         *  connection host->conn(ctx)); set the response; return the result. */
        dedupd_result_t (*handle)(void *state, struct dedupd_ctx *ctx, const struct dedupd_msg *msg);

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
                                        const struct dedupd_msg *const *msgs, size_t cnt, dedupd_result_t *results);

        /** Optional. Called once at shutdown. */
        void (*fini)(void *state);

        /* ---- appended in ABI 1.1: the host checks size before reading ---- */

        /** Optional, the ABI 1.1 way of host->set_evidence (which wins where
         *  both are given): the evidence table fixed at compile time. NULL
         *  and no set_evidence: verify checks keys, counters and lag only. */
        const char *evidence_table;
        /** The key column of evidence_table; NULL: "idem_key". */
        const char *evidence_key_column;

        /* ---- appended in ABI 1.2 ---- */

        /** Optional. The handler's own version ("1.0.3"), printed by
         *  `dedupctl check` and in dedupd's "handler ... loaded" line. */
        const char *version;

        /* ---- appended in ABI 1.3 ---- */

        /** Optional, external mode: ask the downstream, by the key dedupd gave
         *  it, whether an in-doubt key's effect happened. The lease reaper
         *  calls it for keys it marks EXPIRED (at most
         *  external.reconcile_budget a round), and a message that meets an
         *  EXPIRED key calls it before on_expired applies. Runs on dedupd's
         *  connection in autocommit, like handle() in external mode; it must
         *  bound its own time (a call out with a timeout). */
        dedupd_reconcile_t (*reconcile)(void *state, struct dedupd_ctx *ctx, const struct dedupd_in_doubt *key);
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
#define DEDUPD_HANDLER_HAS(d, member) ((d)->size >= offsetof(struct dedupd_handler, member) + sizeof((d)->member))

/** The exported function's type. */
typedef const struct dedupd_handler *(*dedupd_handler_fn)(void);

/** Export a descriptor (see DEDUPD_HANDLER_MAGIC). */
#define DEDUPD_HANDLER_EXPORT(desc)                                                                                    \
        __attribute__((visibility("default"))) const struct dedupd_handler *dedupd_handler_descriptor(void);           \
        const struct dedupd_handler *dedupd_handler_descriptor(void) { return &(desc); }

#ifdef __cplusplus
}
#endif
#endif /* DEDUPD_HANDLER_H */
