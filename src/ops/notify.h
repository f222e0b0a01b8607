/* notify: systemd's service protocol (sd_notify) — READY, WATCHDOG, RELOADING, STOPPING, STATUS; a no-op outside systemd. */
#ifndef DEDUPD_OPS_NOTIFY_H
#define DEDUPD_OPS_NOTIFY_H

#include <stdint.h>

/** Read WATCHDOG_USEC (the unit's WatchdogSec) once; 0 when systemd watches nothing. */
int64_t notify_init(void);
/** READY=1 with a status line (the first assignment; after a reload). */
void notify_ready(const char *status);
void notify_reloading(void);
void notify_stopping(void);
/** WATCHDOG=1 once half of WatchdogSec has passed since the last; safe from any thread. */
void notify_watchdog(int64_t now_ms);

#endif
