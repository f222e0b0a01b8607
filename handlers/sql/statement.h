/* statement: the SQL handler's statement — message sources written in the SQL, bound as parameters. */
#ifndef DEDUPD_SQL_STATEMENT_H
#define DEDUPD_SQL_STATEMENT_H

#include <stddef.h>

#include "dedupd/handler.h"

/** A statement is at most this long and has at most this many distinct sources. */
#define SQL_STATEMENT_MAX_LEN 65536
#define SQL_STATEMENT_MAX_PARAMS 64

struct sql_statement {
        char *sql;      /* the statement with $1..$n in place of the sources */
        size_t nparams; /* distinct sources, in order of first appearance */
        struct sql_param *params;
        int needs_json;
};

/**
 * Compile a statement whose message sources are written in place, as in
 * key templates: {json:PATH}, {header:NAME}, {key} (the Kafka key), and
 * {idem_key}, {topic}, {partition}, {offset}. Each becomes a parameter ($N;
 * one source written twice is one parameter), never text in the SQL. Braces
 * inside quotes, identifiers and comments are left alone, and so is a brace
 * that names no source. Returns NULL with the reason (including a $N of the
 * author's own, which would collide).
 */
struct sql_statement *sql_statement_compile(const char *src, char *err, size_t errsz);
void sql_statement_free(struct sql_statement *st);

/** What parameter i is, as written ("{json:amount}"). */
const char *sql_statement_param_text(const struct sql_statement *st, size_t i);

/**
 * The parameter values for one message, into values[nparams] (each a new
 * string; sql_values_free). Returns 0, or -1 with the reason a source cannot
 * be read (missing field, not exact, not UTF-8): the message's own fault.
 */
int sql_statement_bind(const struct sql_statement *st, const struct dedupd_msg *m, char **values, char *err,
                       size_t errsz);
void sql_values_free(char **values, size_t n);

#endif
