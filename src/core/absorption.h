/* absorption: the continuous absorption check — dedupctl verify's proof (one effect per DONE key, none per FAILED one) run by the daemon on a sample of each topic's keys, exported as gauges. */
#ifndef DEDUPD_CORE_ABSORPTION_H
#define DEDUPD_CORE_ABSORPTION_H

#include <stdint.h>

#include "base/config.h"
#include "core/pipeline.h"
#include "pg/store.h"

/**
 * Every absorption_check.interval (not at start, between batches, on an
 * idle connection): each topic whose handler declared an evidence table
 * (set_evidence, or the descriptor's evidence_table) gets about
 * absorption_check.sample random keys checked against it. The result goes
 * to the dedupd_absorption_* gauges; a violation is logged at ERROR with
 * the first keys (dedupctl verify lists them all). A topic without
 * evidence is said once, at INFO.
 */
void absorption_tick(const struct config *cfg, struct store *s, struct pipeline *pl, int64_t now_ms);

#endif
