/* metrics: what dedupd counts for its operators — every metric's name, help and labels in one place. */
#ifndef DEDUPD_OPS_METRICS_H
#define DEDUPD_OPS_METRICS_H

#include <stddef.h>
#include <stdint.h>

/** Start counting (the daemon does; elsewhere every update is a no-op). */
void metrics_init(void);
void metrics_free(void);
/** The exposition text (a new string; free it), or NULL before metrics_init. */
char *metrics_render(void);

/** dedupd_build_info: the versions, as labels of a constant 1. */
void metrics_build_info(const char *version, const char *handler_abi, const char *broker_client, const char *libpq);

/** The series of a topic, at zero until something happens (so rates work from the start). */
void metrics_topic(const char *topic);
/** A committed batch: its messages by outcome ("applied", "duplicate", "rejected", "dead_lettered"). */
void metrics_messages(const char *topic, const char *outcome, uint64_t n);
void metrics_mismatches(const char *topic, uint64_t n);
/** A committed batch's size and the seconds from BEGIN to COMMIT. */
void metrics_batch(const char *topic, size_t messages, double seconds);
/** A batch rolled back, to be retried. */
void metrics_batch_retry(const char *topic);
/** A failed statement or connection: the SQLSTATE's class ("08", "40", ...; "none" without one). */
void metrics_db_error(const char *sqlstate);
/** Consumer lag of a partition; lag < 0 forgets the partition (revoked). */
void metrics_lag(const char *topic, int32_t partition, int64_t lag);
/** The crash-loop guard ran a message alone. */
void metrics_quarantine(const char *topic);
/** External mode: a lease taken over from an owner that did not finish; keys the reaper expired. */
void metrics_takeover(const char *topic);
void metrics_expired(const char *topic, uint64_t n);
/** FAILED keys a committed batch ran again (on_failed: retry). */
void metrics_failed_retried(const char *topic, uint64_t n);
/** An answer of reconcile(): "done", "failed", "reexecute", "unknown" or "error". */
void metrics_reconciled(const char *topic, const char *answer);
/** A sampled absorbed duplicate: its origin (pg/duplicates.h), producer
 *  (NULL: none) and the seconds since its key's first delivery. */
void metrics_duplicate_sampled(const char *topic, const char *origin, const char *source, double delay_seconds);
/** One absorption check of a topic: DONE keys sampled, their effects, the
 *  keys verify would report, when. */
void metrics_absorption(const char *topic, uint64_t keys, uint64_t effects, uint64_t violations, double unix_time);
/** A committed message of a topic with tenants: its tenant (NULL: none;
 *  past the first `top` tenants seen, "other"), its outcome, whether its
 *  quota refused it. */
void metrics_tenant_message(const char *topic, const char *tenant, const char *outcome, int over_quota, int top);
/** Rows in the outbox not yet published (given-up ones not counted), and given up. */
void metrics_outbox_backlog(uint64_t rows);
void metrics_outbox_given_up_rows(uint64_t rows);
/** A relay round: rows acknowledged, publishes refused, rows given up. */
void metrics_outbox_published(uint64_t rows);
void metrics_outbox_failed(uint64_t rows);
void metrics_outbox_given_up(uint64_t rows);
/** A purge run: keys deleted, responses cleared, sent outbox rows deleted; the time it finished. */
void metrics_purge(uint64_t keys, uint64_t responses, uint64_t outbox_rows, double unix_time);
/** PENDING keys (external mode) and the age of the oldest, in seconds. */
void metrics_pending(uint64_t keys, double oldest_age);
/** Whether the instance is ready (as /readyz says). */
void metrics_ready(int ready);
/** A batch that failed without a message named was split (split.c). */
void metrics_split(const char *topic);
/** Transactional mode: a batch's optimistic claim conflicted with another
 *  transaction's key; retried at once, pessimistically (txn.c). */
void metrics_claim_conflict(const char *topic);
/** A reply not sent, in a committed batch: reason "invalid" or "not_allowed". */
void metrics_reply_refused(const char *topic, const char *reason);
/** n host calls (call: "set_response", "emit") refused a value, in a message whose outcome committed. */
void metrics_handler_refusals(const char *call, uint64_t n);

#endif
