/* bucket_time: dates and day numbers of buckets (base/bucket_time.h). */
#include "base/bucket_time.h"

#include <stdio.h>
#include <string.h>

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
 * (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
        y -= m <= 2;
        int64_t era = (y >= 0 ? y : y - 399) / 400;
        int64_t yoe = y - era * 400;
        int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
        int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
        z += 719468;
        int64_t era = (z >= 0 ? z : z - 146096) / 146097;
        int64_t doe = z - era * 146097;
        int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        int64_t mp = (5 * doy + 2) / 153;
        *d = (int)(doy - (153 * mp + 2) / 5 + 1);
        *m = (int)(mp < 10 ? mp + 3 : mp - 9);
        *y = yoe + era * 400 + (*m <= 2);
}

static int digits(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        return 0;
        return 1;
}

static int month_days(int64_t y, int m)
{
        static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        return days[m - 1] + (m == 2 && leap);
}

/* "YYYY-MM-DD", alone or before 'T' or ' ' and the rest of a time. */
static int parse_date(const char *v, int64_t *ms)
{
        size_t n = strlen(v);
        if (n < 10 || !digits(v, 4) || v[4] != '-' || !digits(v + 5, 2) || v[7] != '-' || !digits(v + 8, 2) ||
            (n > 10 && v[10] != 'T' && v[10] != 't' && v[10] != ' '))
                return -1;
        int64_t y = (v[0] - '0') * 1000 + (v[1] - '0') * 100 + (v[2] - '0') * 10 + (v[3] - '0');
        int m = (v[5] - '0') * 10 + (v[6] - '0'), d = (v[8] - '0') * 10 + (v[9] - '0');
        if (y < 1970 || m < 1 || m > 12 || d < 1 || d > month_days(y, m))
                return -1;
        *ms = days_from_civil(y, m, d) * BUCKET_DAY_MS;
        return 0;
}

int bucket_time_parse(const char *v, int64_t *ms, char *why, size_t whysz)
{
        size_t n = strlen(v);
        if (n && n <= 15 && digits(v, n)) {
                long long x = 0;
                sscanf(v, "%lld", &x);
                *ms = n <= 11 ? (int64_t)x * 1000 : (int64_t)x;
                return 0;
        }
        if (!parse_date(v, ms))
                return 0;
        snprintf(why, whysz, "not a date (YYYY-MM-DD, an ISO 8601 time, or Unix seconds or milliseconds)");
        return -1;
}

int64_t bucket_day_of(int64_t ms)
{
        return ms >= 0 ? ms / BUCKET_DAY_MS : -((-ms + BUCKET_DAY_MS - 1) / BUCKET_DAY_MS);
}

int64_t bucket_start(int64_t day, int64_t width)
{
        int64_t q = day >= 0 ? day / width : -((-day + width - 1) / width);
        return q * width;
}

void bucket_date(int64_t day, char *buf)
{
        int64_t y;
        int m, d;
        civil_from_days(day, &y, &m, &d);
        snprintf(buf, 11, "%04d-%02d-%02d", (int)(y % 10000), m, d);
}

void bucket_label(int64_t day, char *buf)
{
        char date[11];
        bucket_date(day, date);
        snprintf(buf, BUCKET_LABEL_SIZE, "@%s|", date);
}
