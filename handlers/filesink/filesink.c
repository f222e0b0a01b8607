/* filesink: the external-mode example — appends "<idem_key>\t<payload>" to a file, once per key even across owners. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dedupd/handler.h>

/*
 * The file stands for any effect outside PostgreSQL (an HTTP call, an SMS
 * gateway). dedupd cannot make such an effect transactional: an owner that
 * dies after the effect and before recording DONE leaves the key PENDING,
 * and whoever takes it over runs the handler again. What makes that safe is
 * the key dedupd passes: the downstream checks it before acting — here, a
 * line for the key already in the file means the effect happened, and it is
 * not written twice. flock() makes check-then-append one step even for two
 * owners at once (a lost lease).
 *
 * Config: `path:` (required) the file; `delay_ms:` (optional) sleep before
 * writing, so a test can kill the owner mid-effect.
 */

struct filesink {
        char path[4096];
        long delay_ms;
};

static int filesink_init(const struct dedupd_host *host, struct dedupd_init_ctx *ictx, void **state, char *errbuf,
                         size_t errsz)
{
        const char *path = host->config_get(ictx, "path");
        const char *delay = host->config_get(ictx, "delay_ms");
        struct filesink *f;
        char *end = NULL;

        DEDUPD_HOST_REQUIRE(host, set_evidence, errbuf, errsz); /* ABI 1.2: DEDUPD_HOST(ctx) in handle */
        if (!path || !*path) {
                snprintf(errbuf, errsz, "config: path is required (the file to append to)");
                return -1;
        }
        f = calloc(1, sizeof(*f));
        if (!f) {
                snprintf(errbuf, errsz, "out of memory");
                return -1;
        }
        snprintf(f->path, sizeof(f->path), "%s", path);
        if (delay) {
                f->delay_ms = strtol(delay, &end, 10);
                if (!*delay || *end || f->delay_ms < 0) {
                        snprintf(errbuf, errsz, "config: delay_ms '%s' is not a number of milliseconds", delay);
                        free(f);
                        return -1;
                }
        }
        /* Fail at start, not on the first message, when the file cannot be written. */
        int fd = open(f->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
                snprintf(errbuf, errsz, "cannot open %s: %s", f->path, strerror(errno));
                free(f);
                return -1;
        }
        close(fd);
        *state = f;
        return 0;
}

/* 1 when a line of fd starts with "<key>\t". */
static int has_key(int fd, const char *key)
{
        FILE *fp;
        char *line = NULL;
        size_t cap = 0, klen = strlen(key);
        int found = 0;
        int rfd = dup(fd);

        if (rfd < 0 || lseek(rfd, 0, SEEK_SET) < 0 || !(fp = fdopen(rfd, "r"))) {
                if (rfd >= 0)
                        close(rfd);
                return -1;
        }
        while (!found && getline(&line, &cap, fp) >= 0)
                found = !strncmp(line, key, klen) && line[klen] == '\t';
        if (!found && ferror(fp))
                found = -1; /* a read that failed is not a key that is absent */
        free(line);
        fclose(fp);
        return found;
}

/* A line cut short by a crash must not swallow the next one. */
static int ends_with_newline(int fd)
{
        struct stat st;
        char last = '\n';
        if (fstat(fd, &st) < 0)
                return -1;
        if (st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) != 1)
                return -1;
        return last == '\n';
}

/* The payload on one line: backslash, tab and newline escaped. */
static char *escape(const void *value, size_t len, size_t *outlen)
{
        const unsigned char *v = value;
        char *out = malloc(2 * len + 1), *p = out;
        if (!out)
                return NULL;
        for (size_t i = 0; i < len; i++) {
                if (v[i] == '\\' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
                        *p++ = '\\';
                        *p++ = v[i] == '\t' ? 't' : v[i] == '\n' ? 'n' : v[i] == '\r' ? 'r' : '\\';
                } else {
                        *p++ = (char)v[i];
                }
        }
        *outlen = (size_t)(p - out);
        return out;
}

static int write_all(int fd, const char *p, size_t len)
{
        while (len > 0) {
                ssize_t w = write(fd, p, len);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return -1;
                p += w;
                len -= (size_t)w;
        }
        return 0;
}

static dedupd_result_t filesink_handle(void *state, struct dedupd_ctx *ctx, const struct dedupd_msg *msg)
{
        struct filesink *f = state;
        const struct dedupd_host *h = DEDUPD_HOST(ctx);
        dedupd_result_t ret = DEDUPD_RETRY;
        char *payload = NULL, *line = NULL;
        size_t plen = 0;
        int fd = -1;

        if (f->delay_ms > 0) {
                struct timespec ts = {f->delay_ms / 1000, (f->delay_ms % 1000) * 1000000L};
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
        }
        fd = open(f->path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || flock(fd, LOCK_EX) < 0) {
                h->log(ctx, DEDUPD_LOG_WARN, "cannot open or lock %s: %s", f->path, strerror(errno));
                goto out; /* transient as far as we know: RETRY */
        }
        int seen = has_key(fd, msg->idem_key);
        if (seen < 0) {
                h->log(ctx, DEDUPD_LOG_WARN, "cannot read %s: %s", f->path, strerror(errno));
                goto out;
        }
        if (seen) {
                /* An earlier owner wrote it and died before dedupd recorded DONE. */
                h->log(ctx, DEDUPD_LOG_INFO, "%s already has a line for key %s: not written again", f->path,
                       msg->idem_key);
                h->set_response(ctx, "already written", 15);
                ret = DEDUPD_OK;
                goto out;
        }
        payload = escape(msg->value ? msg->value : "", msg->value ? msg->value_len : 0, &plen);
        size_t klen = strlen(msg->idem_key);
        line = payload ? malloc(klen + plen + 2) : NULL;
        if (!line) {
                h->log(ctx, DEDUPD_LOG_WARN, "out of memory");
                goto out;
        }
        memcpy(line, msg->idem_key, klen);
        line[klen] = '\t';
        memcpy(line + klen + 1, payload, plen);
        line[klen + 1 + plen] = '\n';
        /* fsync before OK: DONE must never be recorded for a line the disk may lose. */
        int whole = ends_with_newline(fd);
        if (whole < 0 || (!whole && write_all(fd, "\n", 1) < 0) || write_all(fd, line, klen + plen + 2) < 0 ||
            fsync(fd) < 0) {
                h->log(ctx, DEDUPD_LOG_WARN, "cannot write %s: %s", f->path, strerror(errno));
                goto out;
        }
        h->set_response(ctx, "written", 7);
        ret = DEDUPD_OK;
out:
        if (fd >= 0)
                close(fd); /* releases the lock */
        free(payload);
        free(line);
        return ret;
}

/* In doubt (its owner died before recording an outcome): the file says
 * whether the effect happened — the question any downstream that keeps the
 * idempotency key can answer. A file that cannot be read cannot tell. */
static dedupd_reconcile_t filesink_reconcile(void *state, struct dedupd_ctx *ctx, const struct dedupd_in_doubt *key)
{
        struct filesink *f = state;
        const struct dedupd_host *h = DEDUPD_HOST(ctx);
        int fd = open(f->path, O_RDONLY | O_CLOEXEC), seen = -1;
        if (fd >= 0 && flock(fd, LOCK_SH) == 0)
                seen = has_key(fd, key->idem_key);
        if (fd >= 0)
                close(fd);
        if (seen < 0) {
                h->log(ctx, DEDUPD_LOG_WARN, "reconcile: cannot read %s: %s", f->path, strerror(errno));
                return DEDUPD_RECONCILE_UNKNOWN;
        }
        if (!seen)
                return DEDUPD_RECONCILE_REEXECUTE;
        h->set_response(ctx, "already written", 15);
        return DEDUPD_RECONCILE_DONE;
}

static void filesink_fini(void *state) { free(state); }

static const struct dedupd_handler filesink = {
        DEDUPD_HANDLER_MAGIC,
        .name = "filesink",
        .flags = DEDUPD_HANDLER_F_CLEAN_REJECT, /* it never rejects */
        .init = filesink_init,
        .handle = filesink_handle,
        .fini = filesink_fini,
        .reconcile = filesink_reconcile,
};

DEDUPD_HANDLER_EXPORT(filesink)
