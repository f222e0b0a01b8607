/* health: what /healthz and /readyz answer — the main loop's heartbeat, the database, the broker, the group, stuck topics. */
#ifndef DEDUPD_OPS_HEALTH_H
#define DEDUPD_OPS_HEALTH_H

#include <stddef.h>
#include <stdint.h>

/** The loop counts as dead when it has not beaten for stall_ms (longer than any batch may run). */
void health_init(int64_t stall_ms, size_t topics, const char *const *topic_names);
void health_free(void);

void health_beat(int64_t now_ms);
void health_db(int up);
/** The broker's connection: up, or down and why (the source's words). */
void health_broker(int up, const char *why);
/** A rebalance settled: the instance is in the group with these many partitions (0 is idle by design). */
void health_assigned(size_t partitions);
/** Left the group (revoked, shutting down). */
void health_unassigned(void);
/** Topic t keeps failing (stuck), or recovered. */
void health_stuck(size_t t, int stuck);

/** Alive: 1, or 0 with why. */
int health_alive(int64_t now_ms, char *why, size_t whysz);
/** Ready: 1, or 0 with every reason it is not, in why. */
int health_ready(int64_t now_ms, char *why, size_t whysz);

#endif
