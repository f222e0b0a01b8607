/* verify: audit the dedup tables, the handlers' evidence and the lag, and list every anomaly. */
#ifndef DEDUPD_VERIFY_H
#define DEDUPD_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

/** Outcomes, equal to dedupctl's exit codes. */
enum verify_rc {
        VERIFY_OK = 0,        /* no anomaly */
        VERIFY_ANOMALIES = 1, /* each one listed with its key and origin */
        VERIFY_ERROR = 2,     /* database or Kafka unreachable, schema missing */
};

struct verify_opts {
        int64_t since_ms;     /* counters of batches committed since then; -1: not asked */
        int expect_caught_up; /* lag > 0 on any partition is an anomaly */
        int wait_s;           /* wait up to this long for lag 0 first (and expect it); -1: not asked */
};

/** Print the report on stdout (problems reaching things in err). */
enum verify_rc verify_run(const struct config *cfg, const struct verify_opts *o, char *err, size_t errsz);

#endif
