/* catch_up: dedupctl verify --wait — wait until dedupd has consumed and committed every record there is. */
#include "tools/catch_up.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/mem.h"
#include "pg/audit.h"
#include "source/brokers.h"

/* What the last look found behind, one line each (the broker's words). */
struct behind {
        char **lines;
        size_t cnt;
};

static void behind_clear(struct behind *b)
{
        for (size_t i = 0; i < b->cnt; i++)
                free(b->lines[i]);
        free(b->lines);
        *b = (struct behind){0};
}

static void add_behind(void *opaque, const char *line)
{
        struct behind *b = opaque;
        b->lines = xrealloc(b->lines, (b->cnt + 1) * sizeof(*b->lines));
        b->lines[b->cnt++] = xstrdup(line);
}

/* One look: 0 with b filled (empty: caught up), -1 with err. The lag table
 * itself is not shown while waiting (the report prints it once, at the end). */
static int look(struct store *s, const struct config *cfg, FILE *quiet, struct behind *b, char *err, size_t errsz)
{
        int exists = 0;
        behind_clear(b);
        if (store_relation_exists(s, "dedupd.offsets", &exists, err, errsz))
                return -1;
        if (!exists) {
                add_behind(b, "no dedupd schema yet (dedupd has not started, or not migrated)");
                return 0;
        }
        return broker_of(cfg)->lag(s, cfg, quiet, 1, add_behind, b, err, errsz);
}

static void sleep_ms(int ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
}

enum catch_up_rc catch_up_wait(struct store *s, const struct config *cfg, int wait_s, char *err, size_t errsz)
{
        FILE *quiet = fopen("/dev/null", "w");
        int64_t deadline = log_now_ms() + (int64_t)wait_s * 1000;
        struct behind b = {0};
        enum catch_up_rc rc = CATCH_UP_ERROR;

        if (!quiet) {
                snprintf(err, errsz, "/dev/null: cannot open it");
                return CATCH_UP_ERROR;
        }
        for (;;) {
                /* An answer missing while dedupd starts (NATS: its consumer not made
                 * yet) may come: only the last look's failure ends the wait in error. */
                int failed = look(s, cfg, quiet, &b, err, errsz) != 0;
                if (!failed && !b.cnt) {
                        rc = CATCH_UP_DONE;
                        break;
                }
                if (failed && log_now_ms() >= deadline)
                        break;
                if (log_now_ms() >= deadline) {
                        fprintf(stderr, "dedupctl verify: not caught up after --wait %d s:\n", wait_s);
                        for (size_t i = 0; i < b.cnt; i++)
                                fprintf(stderr, "  %s\n", b.lines[i]);
                        rc = CATCH_UP_BEHIND;
                        break;
                }
                sleep_ms(1000);
        }
        behind_clear(&b);
        fclose(quiet);
        return rc;
}
