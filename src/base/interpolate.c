/* interpolate: ${NAME} and ${NAME:-default} from the environment, ${file:/path} from a file a secret manager mounts (secrets stay out of the file). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/config.h"

#include "base/log.h"
#include "base/mem.h"
#include "base/redact.h"

#define FILE_PREFIX "file:"
#define SECRET_FILE_MAX (64 * 1024) /* a password, a token, a key: not a data file */

/* The whole content of path, trailing newlines (CR or LF) taken off, or NULL
 * with a message naming the path and never the content. A file every user
 * can read is used, with a warning: Kubernetes mounts secrets 0644 in a
 * directory only the pod sees, and refusing them would refuse the common case. */
static char *read_secret_file(const char *path, char *err, size_t errsz)
{
        struct stat st;
        FILE *fp;
        char *buf;
        size_t n;

        if (path[0] != '/') {
                snprintf(err, errsz, "${file:%s}: the path must be absolute", path);
                return NULL;
        }
        if (!stat(path, &st) && !S_ISREG(st.st_mode)) { /* before fopen: opening a FIFO would block */
                snprintf(err, errsz, "${file:%s}: not a regular file of at most %d bytes", path, SECRET_FILE_MAX);
                return NULL;
        }
        if (!(fp = fopen(path, "rb"))) {
                snprintf(err, errsz, "${file:%s}: cannot read the secret file: %s", path, strerror(errno));
                return NULL;
        }
        if (fstat(fileno(fp), &st) || !S_ISREG(st.st_mode) || st.st_size > SECRET_FILE_MAX) {
                snprintf(err, errsz, "${file:%s}: not a regular file of at most %d bytes", path, SECRET_FILE_MAX);
                fclose(fp);
                return NULL;
        }
        buf = xmalloc((size_t)st.st_size + 1);
        n = fread(buf, 1, (size_t)st.st_size, fp);
        if (ferror(fp)) {
                snprintf(err, errsz, "${file:%s}: cannot read the secret file: %s", path, strerror(errno));
                fclose(fp);
                free(buf);
                return NULL;
        }
        fclose(fp);
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
                n--;
        buf[n] = '\0';
        if (memchr(buf, '\0', n)) {
                snprintf(err, errsz, "${file:%s}: the secret file holds a NUL byte", path);
                free(buf);
                return NULL;
        }
        if (st.st_mode & S_IROTH)
                log_warn("config", "secret file %s is readable by every user (mode %04o): chmod o-r it", path,
                         (unsigned)(st.st_mode & 07777));
        redact_add(buf);
        return buf;
}

/* The value of one ${...} (its inside in name, NUL-terminated), malloc'd;
 * NULL with a message. */
static char *expand(char *name, char *err, size_t errsz)
{
        if (!strncmp(name, FILE_PREFIX, strlen(FILE_PREFIX)))
                return read_secret_file(name + strlen(FILE_PREFIX), err, errsz);
        char *dflt = strstr(name, ":-");
        if (dflt) {
                *dflt = '\0';
                dflt += 2;
        }
        if (!*name) {
                snprintf(err, errsz, "empty variable name in ${}");
                return NULL;
        }
        const char *val = getenv(name);
        if (!val || (!*val && dflt))
                val = dflt;
        if (!val) {
                snprintf(err, errsz, "environment variable %s is not set (use ${%s:-default} for an optional value)",
                         name, name);
                return NULL;
        }
        return xstrdup(val);
}

char *config_interpolate(const char *s, char *err, size_t errsz)
{
        size_t cap = strlen(s) + 64, len = 0;
        char *out = xmalloc(cap);

        while (*s) {
                const char *piece = s;
                size_t n = 1;
                char *val = NULL;
                if (s[0] == '$' && s[1] == '{') {
                        const char *end = strchr(s + 2, '}');
                        if (!end) {
                                snprintf(err, errsz, "unterminated ${ in value");
                                free(out);
                                return NULL;
                        }
                        char *name = xstrndup(s + 2, (size_t)(end - s - 2));
                        val = expand(name, err, errsz);
                        free(name);
                        if (!val) {
                                free(out);
                                return NULL;
                        }
                        piece = val;
                        n = strlen(val);
                        s = end + 1;
                } else {
                        s++;
                }
                if (len + n + 1 > cap) {
                        cap = (len + n + 1) * 2;
                        out = xrealloc(out, cap);
                }
                memcpy(out + len, piece, n);
                len += n;
                if (val) {
                        memset(val, 0, n); /* a secret's copy does not outlive its use */
                        free(val);
                }
        }
        out[len] = '\0';
        return out;
}
