/* envfile: a systemd EnvironmentFile= read as systemd reads it, so dedupctl sees the unit's environment. */
#ifndef DEDUPD_BASE_ENVFILE_H
#define DEDUPD_BASE_ENVFILE_H

#include <stddef.h>

/** One assignment, or one line systemd would skip (name NULL, why in value). */
struct envfile_line {
        char *name, *value;
        int line; /* where the assignment begins */
};

struct envfile {
        struct envfile_line *v;
        size_t n;
};

/*
 * systemd's rules (env-file.c): KEY=VALUE lines; blank lines and lines whose
 * first non-blank is # or ; are comments (a trailing backslash continues
 * them, as systemd 252 of Debian 12 does; 254 and later read the next line as
 * an assignment); blanks around KEY and before VALUE are dropped, and at the end of an
 * unquoted VALUE; "..." keeps blanks and takes \" \\ \` \$ as escapes (any
 * other backslash stays); '...' takes everything literally; outside quotes a
 * backslash escapes the next character; a backslash before the line's end
 * continues the value on the next line. No ${VAR} expansion. A line without
 * '=' or with a KEY that is not [A-Za-z_][A-Za-z0-9_]* is skipped.
 */
void envfile_parse(const char *text, size_t len, struct envfile *out);

/** The file parsed; -1 with err when it cannot be read. */
int envfile_read(const char *path, struct envfile *out, char *err, size_t errsz) __attribute__((warn_unused_result));

/** setenv() of each assignment, in order (a later one wins, as in systemd). */
void envfile_apply(const struct envfile *e);

void envfile_free(struct envfile *e);

#endif
