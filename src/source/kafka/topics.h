/* topics: what the broker says of the topics dedupd reads and writes — existence, retention, record size limits. */
#ifndef DEDUPD_TOPICS_H
#define DEDUPD_TOPICS_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

/** How long the checks wait for the broker before they only warn. */
#define TOPICS_CHECK_TIMEOUT_MS 5000

/** Room a dead letter needs beyond its payload: the Kafka key, the original
 *  headers, dedupd's own headers (reason, origin, key, fingerprints) and the
 *  record batch framing. A dead-letter topic must hold max_payload_bytes
 *  plus this. */
#define TOPICS_DLQ_HEADROOM 16384

enum topics_severity { TOPICS_WARN = 1, TOPICS_ERROR = 2 };

/** A problem found, located in the config (file:line:column). */
typedef void(topics_report_cb)(void *opaque, enum topics_severity sev, const char *file, int line, int col,
                               const char *msg);

enum topics_rc {
        TOPICS_OK = 0,
        TOPICS_INVALID,     /* a check failed: the first problem in err */
        TOPICS_UNREACHABLE, /* no broker answered: nothing was checked; err names
                             * bootstrap.servers and says why */
        TOPICS_REFUSED,     /* a broker was reached and the TLS handshake or the SASL
                             * authentication failed: waiting does not mend it */
};

enum topics_mode {
        TOPICS_CHECK_ONLY,     /* dedupctl check: report, change nothing */
        TOPICS_CREATE_MISSING, /* dedupd: create dead-letter topics that say dead_letter.create */
};

/**
 * Ask the broker (DescribeConfigs, one request) about every consumed topic
 * and every dead-letter topic, and check what dedupd relies on:
 *  - each consumed topic exists;
 *  - each dead-letter topic exists (or, in TOPICS_CREATE_MISSING mode with
 *    dead_letter.create, is created now, sized to hold whatever its topic
 *    can hold);
 *  - each dead-letter topic's max.message.bytes holds max_payload_bytes plus
 *    TOPICS_DLQ_HEADROOM;
 *  - each retention class keeps keys at least as long as its topic keeps
 *    messages (unless allow_shorter_than_topic).
 * No broker answering within timeout_ms is TOPICS_UNREACHABLE (reported
 * as an error located at bootstrap.servers; not logged when report is NULL:
 * the daemon waits and says so itself). A broker that answers but refuses
 * the request (an ACL) is a warning per topic: nothing can be told. Each
 * problem goes to report (NULL: logged). dlq_max_bytes (cfg->topic_cnt
 * entries, may be NULL) receives each topic's dead-letter
 * max.message.bytes, -1 where unknown. TOPICS_INVALID when any check failed
 * (the first message in err).
 */
enum topics_rc topics_check(const struct config *cfg, enum topics_mode mode, int timeout_ms, topics_report_cb *report,
                            void *opaque, int64_t *dlq_max_bytes, char *err, size_t errsz)
        __attribute__((warn_unused_result));

#endif
