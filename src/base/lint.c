/* lint: key-design lint — the seed's anti-patterns found in a key template before a message is read. */
#include "base/lint.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
/* One {...} source of a template, as written. */
struct source {
        char kind;       /* 'j' json, 'h' header, 'k' {key}, 'a' {amqp:...}, 'o' anything else */
        char text[160];  /* what is inside the braces, for messages */
        char name[96];   /* json: last member; header: its name; other: the word */
        char parent[96]; /* json: the member before the last one, or "" */
};

#define MAX_SOURCES 16

struct findings {
        struct lint_finding *out;
        size_t max, cnt;
};

static void add(struct findings *f, enum lint_severity sev, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(struct findings *f, enum lint_severity sev, const char *fmt, ...)
{
        va_list ap;
        if (f->cnt >= f->max)
                return;
        f->out[f->cnt].severity = sev;
        va_start(ap, fmt);
        vsnprintf(f->out[f->cnt].message, sizeof(f->out[f->cnt].message), fmt, ap);
        va_end(ap);
        f->cnt++;
}

static void copy(char *dst, size_t dstsz, const char *s, size_t n)
{
        if (n >= dstsz)
                n = dstsz - 1;
        memcpy(dst, s, n);
        dst[n] = '\0';
}

/* "a.b[0].c": the last member and the one before it. */
static void json_names(const char *path, struct source *src)
{
        const char *s = path;
        src->name[0] = src->parent[0] = '\0';
        while (*s) {
                if (*s == '[') {
                        const char *end = strchr(s, ']');
                        s = end ? end + 1 : s + strlen(s);
                } else if (*s == '.') {
                        s++;
                } else {
                        size_t n = strcspn(s, ".[");
                        memcpy(src->parent, src->name, sizeof(src->parent));
                        copy(src->name, sizeof(src->name), s, n);
                        s += n;
                }
        }
}

/* The sources of a template; returns how many (at most max). An unterminated
 * '{' is taken as literal text: config_load has refused it already. */
static size_t scan(const char *tmpl, struct source *src, size_t max)
{
        size_t n = 0;
        const char *s = tmpl;
        while (s && (s = strchr(s, '{')) != NULL && n < max) {
                const char *end = strchr(s, '}');
                struct source *p = &src[n];
                if (!end)
                        break;
                memset(p, 0, sizeof(*p));
                copy(p->text, sizeof(p->text), s + 1, (size_t)(end - s - 1));
                if (!strncmp(p->text, "json:", 5)) {
                        p->kind = 'j';
                        json_names(p->text + 5, p);
                } else if (!strncmp(p->text, "header:", 7)) {
                        p->kind = 'h';
                        snprintf(p->name, sizeof(p->name), "%s", p->text + 7);
                } else if (!strcmp(p->text, "key")) {
                        p->kind = 'k';
                } else if (!strncmp(p->text, "amqp:", 5)) {
                        p->kind = 'a'; /* an AMQP property: config_load checked its name */
                        snprintf(p->name, sizeof(p->name), "%s", p->text + 5);
                } else {
                        p->kind = 'o';
                        snprintf(p->name, sizeof(p->name), "%s", p->text);
                }
                n++;
                s = end + 1;
        }
        return n;
}

/* "createdAt", "event-time", "TS_ms" -> lowercase words: created at, event
 * time, ts ms. Returns the word count. */
static size_t words(const char *name, char w[][32], size_t max)
{
        size_t n = 0, len = 0;
        for (const char *s = name;; s++) {
                int boundary = !*s || !isalnum((unsigned char)*s) ||
                               (s > name && isupper((unsigned char)*s) && islower((unsigned char)s[-1]));
                if (boundary && len) {
                        w[n][len] = '\0';
                        if (++n == max)
                                return n;
                        len = 0;
                }
                if (!*s)
                        return n;
                if (isalnum((unsigned char)*s) && len < 31)
                        w[n][len++] = (char)tolower((unsigned char)*s);
        }
}

static int in_list(const char *w, const char *const *list)
{
        for (; *list; list++)
                if (!strcmp(w, *list))
                        return 1;
        return 0;
}

/* time, timestamp, ts, date, datetime anywhere (event_time, timestamp_ms,
 * orderDate); created/updated, or *_at / *At, as the last word. */
static int looks_like_time(const char *name)
{
        static const char *const anywhere[] = {"time", "timestamp", "ts", "date", "datetime", "epoch", NULL};
        static const char *const last[] = {"created", "updated", "modified", NULL};
        char w[8][32];
        size_t n = words(name, w, 8);
        for (size_t i = 0; i < n; i++)
                if (in_list(w[i], anywhere))
                        return 1;
        return n > 0 && (in_list(w[n - 1], last) || (n > 1 && !strcmp(w[n - 1], "at")));
}

/* Who someone is, not what they do: user_id, userId, uid, customer-id, and
 * user.id (an id inside a user object); a header's x- prefix is ignored. */
static int looks_like_user(const struct source *s)
{
        static const char *const people[] = {"user",  "customer", "cust",  "account", "acct",   "member",     "client",
                                             "buyer", "payer",    "owner", "person",  "player", "subscriber", NULL};
        static const char *const ids[] = {"id", "no", "number", "name", NULL};
        char w[8][32];
        size_t n = words(s->name, w, 8);
        size_t first = (s->kind == 'h' && n > 1 && !strcmp(w[0], "x")) ? 1 : 0;

        if (n - first == 1 && (!strcmp(w[first], "uid") || !strcmp(w[first], "userid") ||
                               !strcmp(w[first], "username") || in_list(w[first], people)))
                return 1;
        if (n - first == 2 && in_list(w[first], people) && in_list(w[first + 1], ids))
                return 1;
        if (n - first == 1 && !strcmp(w[first], "id") && s->parent[0]) {
                char pw[8][32];
                size_t pn = words(s->parent, pw, 8);
                return pn > 0 && in_list(pw[pn - 1], people);
        }
        return 0;
}

/* Why a refused source deduplicates nothing. */
static const char *refused_why(const char *name)
{
        static const struct {
                const char *name, *why;
        } refused[] = {
                {"offset", "is assigned by Kafka to each write: a producer's retry or a replay is a new "
                           "record at a new offset"},
                {"partition", "says where a record landed, not which operation it is"},
                {"topic", "says where a record was written, not which operation it is"},
                {"timestamp", "is stamped on each write: a retry carries a new timestamp"},
                {"time", "is the time of a delivery: a retry carries a new one"},
                {"now", "is the consumer's clock at delivery: every redelivery reads a new one"},
                {"uuid", "is generated by the consumer on every delivery"},
                {"random", "is generated by the consumer on every delivery"},
        };
        for (size_t i = 0; i < sizeof(refused) / sizeof(*refused); i++)
                if (!strcmp(name, refused[i].name))
                        return refused[i].why;
        return NULL;
}

static void lint_part(struct findings *f, const char *part, const struct source *src, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                const char *why;
                if (src[i].kind != 'o')
                        continue;
                why = refused_why(src[i].name);
                if (why)
                        add(f, LINT_ERROR,
                            "key %s: {%s} %s; it is not something the caller sent, and a "
                            "server-generated key deduplicates nothing; build the key from the "
                            "message's business content ({json:order_id}, {header:request-id} or {key})",
                            part, src[i].text, why);
                else
                        add(f, LINT_ERROR,
                            "key %s: unknown key source '{%s}' (expected {json:PATH}, {header:NAME} or "
                            "{key})",
                            part, src[i].text);
        }
        for (size_t i = 0; i < n; i++)
                if ((src[i].kind == 'j' || src[i].kind == 'h') && looks_like_time(src[i].name))
                        add(f, LINT_WARN,
                            "key %s {%s} looks like a timestamp: too fine: a retry carries a new "
                            "timestamp, so nothing deduplicates; key on the business entity "
                            "({json:order_id}) or on a request id the caller reuses on retry",
                            part, src[i].text);
}

int lint_key(const char *subject, const char *action, const char *request, struct lint_finding *out, size_t max)
{
        struct findings f = {out, max, 0};
        struct source s[MAX_SOURCES], a[MAX_SOURCES], r[MAX_SOURCES];
        size_t sn = scan(subject, s, MAX_SOURCES);
        size_t an = scan(action, a, MAX_SOURCES);
        size_t rn = scan(request, r, MAX_SOURCES);
        int has_action = action && *action;
        int has_request = request && *request;

        lint_part(&f, "subject", s, sn);
        lint_part(&f, "action", a, an);
        lint_part(&f, "request", r, rn);
        if (!has_action)
                add(&f, LINT_WARN,
                    "key has no action: two actions on one order would merge (a refund absorbed as a "
                    "duplicate of the payment): add action:, e.g. PAY");
        if (sn == 1 && !has_request && s[0].kind != 'o' && looks_like_user(&s[0]))
                add(&f, LINT_WARN,
                    "key subject {%s} is a bare user id: too coarse: a user's second order would be "
                    "absorbed as a duplicate of the first; key on the operation ({json:order_id}) or "
                    "add request: with an id the caller generates and reuses on retry",
                    s[0].text);
        if (subject && *subject && sn + an + rn == 0)
                add(&f, LINT_WARN,
                    "key reads nothing from the message (every message gets the key '%s%s%s'): all "
                    "but the first would be absorbed as duplicates; use a field such as "
                    "{json:order_id}",
                    subject, has_action ? "/" : "", has_action ? action : "");
        return (int)f.cnt;
}

/* Replies on and nowhere they must stay: any producer chooses where dedupd
 * writes, with dedupd's credentials. */
static int lint_replies(const struct topic_conf *t, struct lint_finding *out, size_t max)
{
        struct findings f = {out, max, 0};
        if (t->reply_header && *t->reply_header && !t->reply_allow)
                add(&f, LINT_WARN,
                    "replies go wherever a message's '%s' header names (any topic but dedupd's own, with dedupd's "
                    "credentials): list where they may go in reply.allow, or turn them off with reply.header: \"\"",
                    t->reply_header);
        return (int)f.cnt;
}

/* A template with each {source} as '*': two templates of one shape can build
 * the same key from two different messages. */
static void shape(const char *tmpl, char *out, size_t outsz)
{
        size_t n = 0;
        for (const char *s = tmpl ? tmpl : ""; *s && n + 1 < outsz; s++) {
                const char *end = *s == '{' ? strchr(s, '}') : NULL;
                out[n++] = end ? '*' : *s;
                if (end)
                        s = end;
        }
        out[n] = '\0';
}

static int same_shape(const char *a, const char *b)
{
        char sa[512], sb[512];
        shape(a, sa, sizeof(sa));
        shape(b, sb, sizeof(sb));
        return !strcmp(sa, sb);
}

static int same_text(const char *a, const char *b) { return !strcmp(a ? a : "", b ? b : ""); }

/* key.previous beside the current template: the same template again, or
 * one of the same shape that reads other fields — then an old key of one
 * message can equal the new key of another, which the window absorbs. */
static int lint_versions(const struct topic_conf *t, struct lint_finding *out, size_t max)
{
        struct findings f = {out, max, 0};
        if (!t->key_prev_subject)
                return 0;
        if (same_text(t->key_subject, t->key_prev_subject) && same_text(t->key_action, t->key_prev_action) &&
            same_text(t->key_request, t->key_prev_request))
                add(&f, LINT_WARN,
                    "key.previous is the current template again (version %d builds the keys version %d did)",
                    t->key_version, t->key_version - 1);
        else if (same_shape(t->key_subject, t->key_prev_subject) && same_shape(t->key_action, t->key_prev_action) &&
                 same_shape(t->key_request, t->key_prev_request))
                add(&f, LINT_WARN,
                    "key versions %d ('%s') and %d ('%s') build keys of the same shape: one message's old key can "
                    "equal another's new key, and until key.previous.until the second is absorbed as a duplicate of "
                    "the first; make them differ by a literal (e.g. subject \"v%d:...\")",
                    t->key_version - 1, t->key_prev_subject, t->key_version, t->key_subject, t->key_version);
        return (int)f.cnt;
}

/* keys.layout: partitioned keeps a partition per bucket from keep + skew
 * back to skew and a bucket ahead; every statement on the keys is planned
 * over all of them. */
#define LINT_MAX_PARTITIONS 400
static int lint_buckets(const struct config *cfg, const struct topic_conf *t, struct lint_finding *out, size_t max)
{
        struct findings f = {out, max, 0};
        char keep[32], bucket[32];
        if (cfg->keys_layout != LAYOUT_PARTITIONED || !t->retention || cfg->keys_bucket_ms <= 0)
                return 0;
        int64_t n = (t->retention->keep_ms + 2 * cfg->keys_skew_ms) / cfg->keys_bucket_ms + 3;
        if (n > LINT_MAX_PARTITIONS)
                add(&f, LINT_WARN,
                    "keys.layout: partitioned keeps about %lld partitions of dedupd.keys_p for keep %s with "
                    "keys.bucket "
                    "%s, and every statement on the keys is planned over them: widen keys.bucket (e.g. 30d) to keep "
                    "them under %d",
                    (long long)n, config_format_duration(t->retention->keep_ms, keep, sizeof(keep)),
                    config_format_duration(cfg->keys_bucket_ms, bucket, sizeof(bucket)), LINT_MAX_PARTITIONS);
        return (int)f.cnt;
}

int lint_config(const struct config *cfg, lint_report_cb *report, void *opaque)
{
        int errors = 0;
        for (size_t i = 0; i < cfg->topic_cnt; i++) {
                const struct topic_conf *t = &cfg->topics[i];
                struct lint_finding f[16];
                int n = lint_key(t->key_subject, t->key_action, t->key_request, f, 15);
                n += lint_replies(t, f + n, (size_t)(16 - n));
                n += lint_versions(t, f + n, (size_t)(16 - n));
                n += lint_buckets(cfg, t, f + n, (size_t)(16 - n));
                for (int k = 0; k < n; k++) {
                        errors += f[k].severity == LINT_ERROR;
                        if (report)
                                report(opaque, t, &f[k]);
                        else
                                LOG(f[k].severity == LINT_ERROR ? LOG_ERROR : LOG_WARN, "lint",
                                    "%s:%d:%d: topic '%s': %s", cfg->path, t->line, t->col, t->name, f[k].message);
                }
        }
        return errors;
}
