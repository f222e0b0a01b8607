/* replay_args: dedupctl's replay and verify arguments — times, offsets, partition lists and plan rates — each parser fed the same string. */
#include "fuzz.h"

#include <inttypes.h>
#include <time.h>

#include "tools/plan.h"
#include "base/isotime.h"
#include "tools/replay.h"

/* An accepted offset is exactly the number written: digits only, no overflow. */
static void offset(const char *s)
{
        int64_t v = -1;
        char err[512], canon[32];
        if (replay_parse_offset(s, &v, err, sizeof(err)))
                return;
        const char *digits = s + strspn(s, "0");
        snprintf(canon, sizeof(canon), "%" PRId64, v);
        FUZZ_ASSERT(v >= 0 && s[0] && strspn(s, "0123456789") == strlen(s) && !strcmp(canon, *digits ? digits : "0"),
                    "'%s' accepted as offset %" PRId64, s, v);
}

/* An accepted time, written back in UTC, parses to the same instant. */
static void time_arg(const char *s)
{
        int64_t ms, again;
        char err[512], buf[64];
        if (isotime_parse(s, &ms, err, sizeof(err)))
                return;
        time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
        struct tm tm;
        if (!gmtime_r(&t, &tm) || tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999)
                return; /* outside what ISO-8601's four digits can write */
        /* %Y would write 123, not the four digits ISO-8601 (and the parser) want */
        snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                 tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms - (int64_t)t * 1000));
        FUZZ_ASSERT(isotime_parse(buf, &again, err, sizeof(err)) == 0 && again == ms,
                    "'%s' is %" PRId64 " ms, written back '%s' (%s)", s, ms, buf, err);
}

static void partitions(const char *s)
{
        int32_t *p = NULL;
        size_t cnt = 0;
        char err[512];
        if (replay_parse_partitions(s, &p, &cnt, err, sizeof(err)))
                return;
        FUZZ_ASSERT(cnt > 0, "'%s': no partition", s);
        for (size_t i = 0; i < cnt; i++) {
                FUZZ_ASSERT(p[i] >= 0, "'%s': partition %d", s, p[i]);
                for (size_t k = 0; k < i; k++)
                        FUZZ_ASSERT(p[k] != p[i], "'%s': partition %d twice", s, p[i]);
        }
        free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *s = malloc(size + 1);
        double rate;
        char err[512];

        memcpy(s, data, size);
        s[size] = '\0';
        offset(s);
        time_arg(s);
        partitions(s);
        if (plan_parse_rate(s, &rate, err, sizeof(err)) == 0)
                FUZZ_ASSERT(rate >= 0 && rate == rate, "'%s' accepted as rate %g", s, rate);
        free(s);
        return 0;
}
